"""The SparkSession the analysis runs in: local by default, quiet, sized for a small machine."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")


def local_cores(master: str) -> int | None:
    """The worker threads of a `local`, `local[N]`, `local[*]` or `local[N,F]` master, else
    None (a cluster master: its cores are not known here)."""
    match = _LOCAL.fullmatch(master.strip())
    if match is None:
        return None
    threads = match.group(1)
    if threads is None:
        return 1
    if threads == "*":
        return os.cpu_count() or 1
    return max(int(threads), 1)


def _log4j_config() -> Path | None:
    """The package's quiet log4j2 file, when it is a real file the JVM can open."""
    path = Path(__file__).with_name("log4j2.properties")
    return path if path.is_file() else None


def _submitted() -> bool:
    """Whether `spark-submit` started this Python (its JVM is already up, its conf set)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "kafkactor-analyze",
    shuffle_partitions: int | None = None,
    ui: bool = False,
) -> SparkSession:
    """A SparkSession for analysing event logs; an active session is returned as it is.

    `master` None means `local[*]`, except under `spark-submit`, whose `--master` (and
    `--name`) then stand. Shuffles use `shuffle_partitions` partitions, by default 2 x the
    cores of a local master and Spark's own default on a cluster (adaptive execution, on
    here, coalesces small shuffles). The web UI is off unless `ui`; the driver logs warnings
    only, and Spark's console progress bar is off (`kafkactor analyze` draws its own).
    Nothing sets the driver's memory: a local session takes the JVM's default, a
    `spark-submit` its own `--driver-memory`.
    """
    if SparkSession.getActiveSession() is not None:
        return SparkSession.builder.getOrCreate()
    builder = (
        SparkSession.builder.config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
    )
    if master is not None or not _submitted():
        builder = builder.master(master or DEFAULT_MASTER).appName(app_name)
    log4j = _log4j_config()
    if log4j is not None and not _submitted():
        # Read only by a driver JVM this call starts: it silences the start-up banner and the
        # loopback-address warning of a local session.
        builder = builder.config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}"
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if shuffle_partitions is None:
        cores = local_cores(str(spark.sparkContext.master))
        configured = spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions")
        if cores is not None and not configured:
            shuffle_partitions = 2 * cores
    if shuffle_partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    return spark
