"""Building the SparkSession of a job: local mode by default, the MariaDB JDBC driver on the
driver's and executors' class path, no UI, small shuffles.

The JDBC driver is Debian's ``libmariadb-java`` (``/usr/share/java/mariadb-java-client.jar``),
or the jar ``SPARK_JDBC_JAR`` names (the product image bundles it there for the cluster). It is
put on the driver's own class path as well, so ``java.sql.DriverManager`` finds it for the
statements the jobs run themselves (``services.spark.jdbc``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

DEBIAN_JAR = "/usr/share/java/mariadb-java-client.jar"
JAR_ENV = "SPARK_JDBC_JAR"


def jdbc_jar() -> str | None:
    """The MariaDB JDBC jar to ship, or None when there is none on this machine."""
    path = os.environ.get(JAR_ENV) or DEBIAN_JAR
    return path if Path(path).is_file() else None


def session_conf(
    master: str = "local[*]",
    *,
    shuffle_partitions: int = 8,
    driver_memory: str = "1g",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The configuration ``spark_session`` applies (pure, for tests and the k8s renderer)."""
    conf = {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.driver.memory": driver_memory,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.compression.codec": "snappy",
        "spark.sql.adaptive.enabled": "true",
    }
    jar = jdbc_jar()
    if jar is not None:
        conf["spark.jars"] = jar
        conf["spark.driver.extraClassPath"] = jar
    conf.update(extra or {})
    return conf


def spark_session(
    app_name: str,
    master: str | None = None,
    *,
    shuffle_partitions: int = 8,
    driver_memory: str = "1g",
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session for ``app_name``; ``master`` defaults to ``SPARK_MASTER`` or ``local[*]``.

    Under ``spark-submit`` the submitted configuration wins over these defaults for settings
    the submission gave (``getOrCreate`` keeps a running context's own).
    """
    conf = session_conf(
        master or os.environ.get("SPARK_MASTER", "local[*]"),
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        extra=extra,
    )
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
