"""TiDB's DDL action types (``model.ActionType``) and how a replica treats them.

Only the types the schema tracker tells apart are named; jobs of other (newer) types keep
their plain int and are treated as table changes when they carry a table info.
"""

from __future__ import annotations

import enum


class Action(enum.IntEnum):
    """``model.ActionType`` (the subset the tracker tells apart; other values pass as ints)."""

    NONE = 0  # a statement whose schema change, if any, other jobs describe
    CREATE_SCHEMA = 1
    DROP_SCHEMA = 2
    CREATE_TABLE = 3
    DROP_TABLE = 4
    ADD_COLUMN = 5
    DROP_COLUMN = 6
    ADD_INDEX = 7
    DROP_INDEX = 8
    TRUNCATE_TABLE = 11
    MODIFY_COLUMN = 12
    RENAME_TABLE = 14
    SET_DEFAULT_VALUE = 15
    RENAME_INDEX = 18
    CREATE_VIEW = 21
    DROP_VIEW = 24
    RECOVER_TABLE = 25
    MODIFY_SCHEMA_CHARSET_AND_COLLATE = 26
    LOCK_TABLE = 27
    UNLOCK_TABLE = 28
    UPDATE_TIFLASH_REPLICA_STATUS = 31
    ADD_PRIMARY_KEY = 32
    DROP_PRIMARY_KEY = 33
    CREATE_SEQUENCE = 34
    DROP_SEQUENCE = 36
    RENAME_TABLES = 47
    ALTER_TABLE_ATTRIBUTES = 49
    ALTER_TABLE_PARTITION_ATTRIBUTES = 50
    CREATE_PLACEMENT_POLICY = 51
    ALTER_PLACEMENT_POLICY = 52
    DROP_PLACEMENT_POLICY = 53
    ALTER_TABLE_PARTITION_PLACEMENT = 54
    MODIFY_SCHEMA_DEFAULT_PLACEMENT = 55
    ALTER_TABLE_PLACEMENT = 56
    ALTER_CACHE_TABLE = 57
    ALTER_NO_CACHE_TABLE = 59
    CREATE_TABLES = 60
    MULTI_SCHEMA_CHANGE = 61
    CREATE_RESOURCE_GROUP = 68
    ALTER_RESOURCE_GROUP = 69
    DROP_RESOURCE_GROUP = 70


# Jobs that change nothing a replica needs (tidb-binlog's ``skipUnsupportedDDLJob``).
NOT_REPLICATED = frozenset(
    {
        Action.UPDATE_TIFLASH_REPLICA_STATUS,
        Action.LOCK_TABLE,
        Action.UNLOCK_TABLE,
        Action.ALTER_CACHE_TABLE,
        Action.ALTER_NO_CACHE_TABLE,
        Action.ALTER_TABLE_ATTRIBUTES,
        Action.ALTER_TABLE_PARTITION_ATTRIBUTES,
        Action.CREATE_PLACEMENT_POLICY,
        Action.ALTER_PLACEMENT_POLICY,
        Action.DROP_PLACEMENT_POLICY,
        Action.ALTER_TABLE_PARTITION_PLACEMENT,
        Action.MODIFY_SCHEMA_DEFAULT_PLACEMENT,
        Action.ALTER_TABLE_PLACEMENT,
        Action.CREATE_RESOURCE_GROUP,
        Action.ALTER_RESOURCE_GROUP,
        Action.DROP_RESOURCE_GROUP,
    }
)

# Jobs that change one table's columns or keys: they must carry the new table info.
TABLE_CHANGES = frozenset(
    {
        Action.ADD_COLUMN,
        Action.DROP_COLUMN,
        Action.MODIFY_COLUMN,
        Action.SET_DEFAULT_VALUE,
        Action.ADD_INDEX,
        Action.DROP_INDEX,
        Action.RENAME_INDEX,
        Action.ADD_PRIMARY_KEY,
        Action.DROP_PRIMARY_KEY,
        Action.MULTI_SCHEMA_CHANGE,
    }
)
