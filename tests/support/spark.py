"""A real Spark (local mode) for tests: one session per pytest session, the MariaDB JDBC jar.

The jar is Debian's ``libmariadb-java``, which ``make deps`` installs; a test asking for Spark on
a machine without it fails at once with "libmariadb-java is missing: run `make deps`".
Register with ``pytest_plugins = ["tests.support.spark"]`` in the test module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from services.spark.session import spark_session
from tests.support.components import component


def ensure_jar() -> str:
    """Debian's MariaDB JDBC jar (``make deps`` installs libmariadb-java), or fail at once."""
    return str(component("libmariadb-java"))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    ensure_jar()
    session = spark_session(
        "tributary-tests",
        "local[2]",
        shuffle_partitions=2,
        driver_memory="512m",
        extra={"spark.sql.adaptive.enabled": "false"},
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
