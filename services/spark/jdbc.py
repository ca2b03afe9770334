"""MySQL/MariaDB over JDBC for the jobs: URLs, and the driver-side connection the jobs run
their own statements on (preparing staging tables, the final merge, locks, positions).

The URL is ``jdbc:mysql://HOST:PORT/?permitMysqlScheme&...``: MariaDB's driver accepts the
``mysql`` scheme with ``permitMysqlScheme``, and Spark picks its MySQL dialect (backtick
quoting) by that scheme; ``allowLocalInfile`` lets the driver's connection send the CSV files
of ``LOAD DATA LOCAL INFILE`` (``services.spark.load_data``). The connection goes through the
JVM's ``java.sql.DriverManager`` (py4j), so a cluster needs nothing beyond the driver jar the
executors already use. Errors map to ``JobError``; SQL states of class 08 (connection) and 40
(rollback: deadlock) are retriable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import SplitResult, urlsplit

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from services.spark.errors import JobError
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.mysql.config import parse_url

log = logging.getLogger(__name__)

DRIVER = "org.mariadb.jdbc.Driver"
RETRIABLE_STATES = ("08", "40")


@dataclass(frozen=True)
class MysqlEndpoint:
    host: str
    port: int
    user: str
    password: str
    time_zone: str = "+00:00"

    @classmethod
    def from_url(cls, url: str | SplitResult) -> MysqlEndpoint:
        """From a ``mysql://user:pw@host:port/?...`` sink URL (``sinks.mysql``'s options)."""
        parts = urlsplit(url) if isinstance(url, str) else url
        try:
            cfg = parse_url(parts._replace(path=""), SinkOptions(cluster_id=0))
        except SinkError as e:
            raise JobError(str(e)) from e
        c = cfg.connect
        return cls(c.host, c.port, c.user, c.password, c.time_zone)

    @property
    def jdbc_url(self) -> str:
        return (
            f"jdbc:mysql://{self.host}:{self.port}/?permitMysqlScheme"
            "&rewriteBatchedStatements=true&useServerPrepStmts=false&allowLocalInfile=true"
        )

    def properties(self) -> dict[str, str]:
        """Spark's JDBC options for this endpoint (user, password, driver)."""
        return {"user": self.user, "password": self.password, "driver": DRIVER}

    def __repr__(self) -> str:
        return f"MysqlEndpoint({self.user}@{self.host}:{self.port})"


def _error(what: str, e: Py4JJavaError) -> JobError:
    java = e.java_exception
    state = ""
    try:
        state = str(java.getSQLState() or "")
    except Exception:  # not an SQLException: no state
        state = ""
    text = str(java.toString())
    return JobError(f"{what}: {text}", retriable=state.startswith(RETRIABLE_STATES))


class JdbcSession:
    """One JDBC connection on the Spark driver; a context manager closing it."""

    def __init__(self, spark: SparkSession, endpoint: MysqlEndpoint) -> None:
        jvm: Any = spark.sparkContext._jvm
        props = jvm.java.util.Properties()
        props.setProperty("user", endpoint.user)
        props.setProperty("password", endpoint.password)
        try:
            self._conn: Any = jvm.java.sql.DriverManager.getConnection(endpoint.jdbc_url, props)
        except Py4JJavaError as e:
            raise _error(f"cannot connect to {endpoint!r}", e) from e
        self.execute("SET SESSION foreign_key_checks = 0")
        self.execute(f"SET SESSION time_zone = '{endpoint.time_zone}'")

    def execute(self, sql: str) -> int:
        """Run one statement; the affected row count."""
        try:
            stmt = self._conn.createStatement()
            try:
                return int(stmt.executeUpdate(sql))
            finally:
                stmt.close()
        except Py4JJavaError as e:
            raise _error(f"statement failed ({sql[:200]})", e) from e

    def query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run one query; its rows as text cells (None for NULL)."""
        try:
            stmt = self._conn.createStatement()
            try:
                rs = stmt.executeQuery(sql)
                width = int(rs.getMetaData().getColumnCount())
                rows: list[tuple[str | None, ...]] = []
                while rs.next():
                    rows.append(tuple(rs.getString(i + 1) for i in range(width)))
                return rows
            finally:
                stmt.close()
        except Py4JJavaError as e:
            raise _error(f"query failed ({sql[:200]})", e) from e

    def begin(self) -> None:
        self._conn.setAutoCommit(False)

    def commit(self) -> None:
        try:
            self._conn.commit()
        except Py4JJavaError as e:
            raise _error("commit failed", e) from e
        finally:
            self._conn.setAutoCommit(True)

    def rollback(self) -> None:
        try:
            self._conn.rollback()
            self._conn.setAutoCommit(True)
        except Py4JJavaError as e:
            log.warning("rollback failed: %s", e.java_exception)

    def close(self) -> None:
        try:
            self._conn.close()
        except Py4JJavaError as e:
            log.warning("closing a JDBC connection failed: %s", e.java_exception)

    def __enter__(self) -> JdbcSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
