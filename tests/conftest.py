"""Shared fixtures: one SparkSession per test process (per xdist worker), real tables copied
before any change."""

from __future__ import annotations

import contextlib
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
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A classic local[2] session shared by every Spark test of the run; its warehouse (where
    managed tables and deltalog's table names live) is a temporary folder."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.warehouse.dir", str(warehouse))
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


@pytest.fixture
def connect_spark(_connect_session: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A Spark Connect session for the Connect tier. During the test PySpark's functions build
    Connect columns (``SPARK_CONNECT_MODE_ENABLED``, as in a Connect-only process); the test
    must not use the classic session."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    return _connect_session


@pytest.fixture(scope="session")
def _connect_session(spark: Any) -> Iterator[Any]:
    """The Connect session, served by the classic session's own JVM.

    PySpark refuses ``builder.remote("local")`` while a classic session runs, and a second JVM
    would cost a second start; instead Spark Connect's gRPC service is started on the running
    SparkContext (on a free port) and a Connect client talks to it.
    """
    import socket

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sc = spark.sparkContext._jsc.sc()
    sc.conf().set("spark.connect.grpc.binding.port", str(port))
    service = spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(sc)
    session = ConnectSession.builder.remote(f"sc://localhost:{port}").getOrCreate()
    yield session
    session.stop()
    with contextlib.suppress(Exception):  # the JVM ends with the classic session anyway
        # Scala's default arguments, by their JVM names
        service.stop(getattr(service, "stop$default$1")(), getattr(service, "stop$default$2")())


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """``./dev test`` is the suite of one SparkSession per test process. Tests that start
    servers (``servers``: Spark's, or an object-store emulator's for Spark) or Spark sessions and
    clusters (``processes``) in processes of their own run under ``./dev servers``
    (DELTALOG_SERVER_TESTS; CI runs it); ``./dev compat`` runs the ``processes`` ones too
    (DELTALOG_PROCESS_TESTS). The differential condition suite (``differential``) runs under
    ``./dev fuzz`` and ``./dev compat`` (DELTALOG_DIFFERENTIAL; CI runs both). Tests marked
    ``long`` go first, so that ``-n 2`` starts them early (xdist hands tests out in collection
    order)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable sort
    if not os.environ.get("DELTALOG_DIFFERENTIAL"):
        fuzz = pytest.mark.skip(reason="the differential suite: ./dev fuzz (CI runs its seed)")
        for item in items:
            if item.get_closest_marker("differential"):
                item.add_marker(fuzz)
    if os.environ.get("DELTALOG_SERVER_TESTS"):
        return
    skip = pytest.mark.skip(reason="starts Spark servers of its own: run by ./dev servers (CI)")
    own = pytest.mark.skip(reason="starts Spark in processes of its own: ./dev servers (CI)")
    processes = bool(os.environ.get("DELTALOG_PROCESS_TESTS"))
    for item in items:
        if item.get_closest_marker("servers"):
            item.add_marker(skip)
        elif item.get_closest_marker("processes") and not processes:
            item.add_marker(own)
