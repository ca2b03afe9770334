"""SQL text shared by the sinks, the checker and the load generator: the MySQL and SQLite
dialects, identifier quoting and the statements of a row change (``sql.statements``)."""

from tributary.sql.statements import (
    MYSQL,
    SQLITE,
    Dialect,
    Statement,
    delete,
    delete_many,
    insert,
    quote,
    row_statements,
    sqlite_name,
    table_name,
    update,
)

__all__ = [
    "MYSQL",
    "SQLITE",
    "Dialect",
    "Statement",
    "delete",
    "delete_many",
    "insert",
    "quote",
    "row_statements",
    "sqlite_name",
    "table_name",
    "update",
]
