"""Shared fixtures: one SparkSession per test run, real tables copied before any change."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltalog import DeltaLog
from tests.conformance.oracle import TABLES

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist (``--dist loadgroup``) every test that uses the SparkSession runs in one
    worker, so the run starts one JVM session; the pure tests fill the other worker."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures or "connect_spark" in fixtures:
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(autouse=True)
def _fresh_log_cache() -> Iterator[None]:
    # DeltaLog caches one instance per path; tests that rewrite tables must not see old ones.
    DeltaLog.clear_cache()
    yield
    DeltaLog.clear_cache()


@pytest.fixture
def copy_table(tmp_path: Path) -> Any:
    """Copy a shared table (path relative to shared/tables) to a temporary folder."""

    def copy(rel: str) -> Path:
        dest = tmp_path / rel.replace("/", "__")
        shutil.copytree(TABLES / rel, dest)
        return dest

    return copy


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A classic local[2] session shared by every Spark test of the run."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("deltalog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.databricks.delta.snapshotPartitions", "4")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_spark(spark: Any) -> Iterator[Any]:
    """A Spark Connect session (in-process server on local[2]) for the Connect tier.

    Started after the classic session is stopped would cost a second JVM start; instead it runs
    beside it, so Connect tests share the same machine budget.
    """
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote("local[2]").appName("deltalog-connect").getOrCreate()
    yield session
    session.stop()
