"""A real Spark (local mode) for tests: one session per pytest session, the MariaDB JDBC jar.

The jar is Debian's ``libmariadb-java``; when it is missing the first test asking for Spark
installs it with apt (serialised across pytest sessions by a lock file), as
``tests.support.mariadb`` does for the server. A failed install fails the test with apt's output.
Register with ``pytest_plugins = ["tests.support.spark"]`` in the test module.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from services.spark.session import DEBIAN_JAR, spark_session

PACKAGE = "libmariadb-java"
_LOCK = Path(tempfile.gettempdir()) / "tributary-jdbc-install.lock"
_SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def ensure_jar() -> str:
    if Path(DEBIAN_JAR).is_file():
        return DEBIAN_JAR
    with open(_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not Path(DEBIAN_JAR).is_file():
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "PATH": _SBIN_PATH}
            for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", PACKAGE]):
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    out = (done.stdout + done.stderr)[-4000:]
                    raise RuntimeError(f"`{' '.join(cmd)}` failed: {out}")
    return DEBIAN_JAR


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
