"""The image's entrypoint (``scripts/image-entrypoint``) runs what Spark on Kubernetes starts.

In cluster mode Spark gives the driver container only ``driver --properties-file ... --class
org.apache.spark.deploy.PythonRunner <job> <args>``; the entrypoint must turn that into a
client-mode spark-submit bound to the pod's address. Here the driver branch runs for real
(pyspark's spark-submit, a local master named in the properties file, as Spark's submission
would write it) and the job sees the bind address and client deploy mode. The executor branch
needs a live driver; what is checked is that it refuses clearly without Spark's environment.
Any other command passes through, as the StatefulSets' commands do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENTRYPOINT = Path(__file__).resolve().parents[2] / "scripts" / "image-entrypoint"
JOB = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
conf = spark.sparkContext.getConf()
rows = spark.range(1000).selectExpr("sum(id) AS s").collect()[0]["s"]
seen = [rows, conf.get("spark.driver.bindAddress"), conf.get("spark.submit.deployMode")]
with open(sys.argv[1], "w") as out:
    out.write(" ".join(map(str, seen)))
spark.stop()
"""


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    venv_bin = str(Path(sys.executable).parent)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    base["PATH"] = f"{venv_bin}:{base.get('PATH', '')}"
    return subprocess.run(
        [str(ENTRYPOINT), *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=110,
    )


def test_other_commands_pass_through() -> None:
    done = run("sh", "-c", 'echo "$0 ran"', "binlog-pump")
    assert done.returncode == 0 and done.stdout == "binlog-pump ran\n"
    empty = run()
    assert empty.returncode == 64 and "give a command" in empty.stderr


def test_the_driver_branch_runs_the_job_in_client_mode_on_the_pod_address(tmp_path: Path) -> None:
    job, out, props = tmp_path / "job.py", tmp_path / "out.txt", tmp_path / "spark.properties"
    job.write_text(JOB)
    props.write_text(
        "spark.master=local[1]\n"
        "spark.app.name=entrypoint-test\n"
        "spark.driver.memory=512m\n"
        "spark.ui.enabled=false\n"
    )
    args = ["--properties-file", str(props), "--class", "org.apache.spark.deploy.PythonRunner"]
    done = run("driver", *args, str(job), str(out), env={"SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_text() == "499500 127.0.0.1 client"


def test_spark_modes_refuse_without_sparks_environment() -> None:
    driver = run("driver", "--class", "x")
    assert driver.returncode == 64 and "SPARK_DRIVER_BIND_ADDRESS" in driver.stderr
    executor = run("executor", env={"SPARK_DRIVER_URL": "spark://x"})
    assert executor.returncode == 64 and "SPARK_EXECUTOR_ID" in executor.stderr
