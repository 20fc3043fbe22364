"""A table with a widened column on Spark before 4.0 (PySpark 3.5: ``./dev compat``).

Spark 3.5's parquet reader cannot read an ``INT32`` file column as the table's ``bigint``
("Expected: bigint, Found: INT32", inside a task). Every path that makes Spark's reader read the
table's files (a read, the change feed, DELETE, UPDATE, MERGE and OPTIMIZE on Spark's engine)
refuses such a table with the typed ``DELTA_UNSUPPORTED_FEATURES_FOR_READ`` before any Spark job
runs and before anything is written; the local engine (pyarrow, which widens) still runs DML on
it. The widened files come from deltalog's Python writer (Spark 3.5 cannot write them).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.spark.engine import ENGINE_KEY
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, duckdb_rows
from tests.spark.confs import session_confs

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not __import__("pyspark").__version__.startswith("3."),
        reason="Spark 4.0+ reads widened files (tests/spark/write/test_type_widening.py)",
    ),
]

WIDENING = {"delta.enableTypeWidening": "true", "delta.enableChangeDataFeed": "true"}


def _widened(root: str) -> None:
    """``id`` written as int32, then widened to long by an append of a long value."""
    narrow = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "v": ["a", "b", "c"]})
    deltalog.write_table(root, narrow, configuration=WIDENING)
    wide = pa.table({"id": pa.array([2**40], pa.int64()), "v": ["d"]})
    deltalog.write_table(root, wide, mode="append", schema_mode="merge")


def _jobs_of(spark: Any, action: Callable[[], Any]) -> tuple[BaseException | None, list[int]]:
    """What ``action`` raised, and the ids of the Spark jobs it started."""
    sc = spark.sparkContext
    group = f"widened-{uuid.uuid4().hex}"
    sc.setLocalProperty("spark.jobGroup.id", group)
    try:
        action()
        raised = None
    except Exception as e:  # returned for the caller's assertions
        raised = e
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return raised, list(sc.statusTracker().getJobIdsForGroup(group))


def _files(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file()}


def test_spark_engine_refuses_a_widened_table_before_any_job(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _widened(root)
    fmt = deltalog.register(spark)
    before = _files(root)
    source = spark.createDataFrame([(1, "m"), (9, "n")], "id long, v string")
    table = DeltaTable.forPath(spark, root)
    commands: dict[str, Callable[[], Any]] = {
        "read": lambda: spark.read.format(fmt).load(root).collect(),
        "change feed": lambda: (
            spark.read.format(fmt)
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .load(root)
            .collect()
        ),
        "delete": lambda: table.delete("id = 1"),
        "update": lambda: table.update("id = 1", {"v": "'z'"}),
        "merge": lambda: (
            table.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        ),
        "optimize": lambda: table.optimize().executeCompaction(),
        "sql delete": lambda: spark.sql(f"DELETE FROM delta.`{root}` WHERE id = 2"),
    }
    with session_confs(spark, {ENGINE_KEY: "spark"}):
        for name, command in commands.items():
            raised, jobs = _jobs_of(spark, command)
            assert isinstance(raised, errors.UnsupportedFeatureError), (name, raised)
            assert raised.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_READ", name
            assert "needs Spark 4.0" in str(raised), name
            assert jobs == [], f"{name} ran Spark jobs {jobs} before refusing"
    assert DeltaLog.for_table(root).update().version == 1
    assert _files(root) == before  # nothing written, not even a staging folder

    # The local engine reads with pyarrow (which widens): DML still runs on this Spark.
    with session_confs(spark, {ENGINE_KEY: "local"}):
        table.delete("id = 1")
        table.update("id = 2", {"v": "'z'"})
    expected = pa.table(
        {"id": pa.array([2, 3, 2**40], pa.int64()), "v": ["z", "c", "d"]},
    )
    assert canonical(duckdb_rows(root)) == canonical(expected)


def test_enabled_widening_without_a_change_reads(spark: Any, tmp_path: Path) -> None:
    """The feature alone (no ``delta.typeChanges`` yet): every file has the table's types."""
    root = str(tmp_path / "t")
    deltalog.write_table(
        root, pa.table({"id": pa.array([1, 2], pa.int64())}), configuration=WIDENING
    )
    assert "typeWidening" in (DeltaLog.for_table(root).update().protocol.reader_features or ())
    fmt = deltalog.register(spark)
    assert sorted(r.id for r in spark.read.format(fmt).load(root).collect()) == [1, 2]
