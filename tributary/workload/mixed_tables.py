"""The tables of the mixed workload and how rows are located in them (see ``workload.mixed``).

Invariant: every table has an integer locator column (the first column of its primary key,
else of its first unique key) that is unique on its own or together with ``region``.
"""

from __future__ import annotations

from tributary.tidbcodec import mysqltypes as mt
from tributary.workload import columns as c
from tributary.workload.catalog import Table

BASE = (
    c.TableSpec(
        "sbtest",
        (
            c.bigint("id", not_null=True),
            c.int_("k", not_null=True, default="0"),
            c.varchar("c", 120, not_null=True),
            c.char("pad", 60, not_null=True),
        ),
        primary_key=("id",),
        unique_keys={"uk_c": ("c",)},
        indexes={"k_idx": ("k",)},
    ),
    c.TableSpec(
        "nopk",
        (c.bigint("u", not_null=True), c.varchar("name", 32), c.int_("qty")),
        unique_keys={"uk_u": ("u",)},
    ),
    c.TableSpec(
        "alltypes",
        (
            c.bigint("id", not_null=True),
            c.decimal("d", 12, 3),
            c.datetime("dt", 3),
            c.timestamp("ts", 6),
            c.date("da"),
            c.time("ti", 2),
            c.year("y"),
            c.enum("e", ("red", "green", "blue")),
            c.set_("s", ("a", "b", "c", "d")),
            c.bit("b", 12),
            c.json("j"),
            c.blob("bl"),
            c.float_("f"),
            c.double("db"),
            c.bigint("ub", unsigned=True),
            c.varbinary("vb", 16),
            c.text("tx"),
        ),
        primary_key=("id",),
    ),
    c.TableSpec(
        "composite",
        (
            c.int_("n", not_null=True),
            c.varchar("region", 8, not_null=True),
            c.bigint("val"),
            c.datetime("at"),
        ),
        primary_key=("n", "region"),
    ),
)
SHAPES = (BASE[0], BASE[3])  # what tables created mid-stream look like
REGIONS = ("eu", "us", "ap", "af")


def locator(table: Table) -> str:
    """The integer column new keys are drawn from and rows are picked by."""
    info = table.info
    key = info.primary_key or next(iter(info.unique_keys.values()), ())
    if not key or key[0].ft.tp not in mt.INTEGER_TYPES:
        raise ValueError(f"{table.qualified} has no integer key column to locate rows by")
    return key[0].name


def key_columns(table: Table) -> set[str]:
    info = table.info
    return {col.name for col in info.primary_key} | {
        col.name for key in info.unique_keys.values() for col in key
    }
