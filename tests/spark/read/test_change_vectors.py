"""The change feed of deletion-vector changes on Spark, through every reader: Spark's parquet
reader (the vectors expanded into (plan row, row) pairs by executor tasks, joined broadcast or
shuffled), the Python data source and the streaming source (each task reads its plan row's
vectors), against deltalake's ``load_cdf``; no reader gets rows from the driver."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.change_data_feed import CdfRange, plan_changes, read_plan
from deltalog.spark.read import change_vectors
from deltalog.spark.read.load import load_with_python_source
from deltalog.spark.session import to_arrow
from deltalog.tables import read_changes
from tests.conformance.cdf import normalize, oracle_changes, write_vector_history
from tests.conformance.rows import canonical
from tests.spark.confs import session_confs

pytestmark = pytest.mark.spark

HAS_DATA_SOURCES = importlib.util.find_spec("pyspark.sql.datasource") is not None
HAS_STREAMING_SOURCES = importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None
ROWS = 10_000
ENGINE = "spark.deltalog.engine"  # the change feed of a small range is read on the driver


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("spark-cdf-vectors") / "t"
    write_vector_history(root, ROWS)
    return str(root)


def _expected(root: str, start: int, end: int) -> list[str]:
    """``load_cdf`` up to v3; v4 (a file removed with its vector, where deltalake 1.6 answers
    the vector's rows rather than the live ones, see tests/conformance/test_cdf_vectors.py)
    from the engine-free reader, checked there."""
    if end <= 3:
        return normalize(oracle_changes(root, start, end))
    return normalize(read_plan(plan_changes(DeltaLog.for_table(root), CdfRange(start, end))))


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast", "shuffled"])
def test_parquet_reader_selects_rows_in_the_executors(
    spark: Any, vectors: str, broadcast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not broadcast:  # every selection counts as large: the shuffled hash join
        monkeypatch.setattr(change_vectors, "BROADCAST_ROWS", 0)
    with session_confs(spark, {ENGINE: "spark"}):
        for start, end in ((0, 3), (4, 4)):
            df = read_changes(spark, vectors, starting_version=start, ending_version=end)
            assert normalize(to_arrow(df)) == _expected(vectors, start, end), (start, end)
        plan = df._jdf.queryExecution().executedPlan().toString()
    assert "MapInArrow" in plan  # the pairs come from tasks
    assert ("ShuffledHashJoin" in plan) is not broadcast


def test_python_data_source_tasks_carry_descriptors(spark: Any, vectors: str) -> None:
    if not HAS_DATA_SOURCES:
        pytest.skip("Python data sources need PySpark 4.0+")
    from deltalog.spark.read.data_source import DeltaReadSource
    from deltalog.spark.read.source_tasks import ChangeTask

    options = {"path": vectors, "readChangeFeed": "true", "startingVersion": "0"}
    source = DeltaReadSource(options)
    reader = source.reader(None)
    tasks = [t for group in source._tasks for t in group.files]
    assert tasks and all(isinstance(t, ChangeTask) for t in tasks)
    # What Spark pickles to the executors: the plan rows' descriptors, not the rows
    # (their vectors hold over 10,000 rows).
    assert len(pickle.dumps(reader)) < 16 * 1024
    name = deltalog.register(spark)
    for start, end in ((0, 3), (4, 4)):
        reader = spark.read.format(name).option("readChangeFeed", "true")
        reader = reader.option("startingVersion", start).option("endingVersion", end)
        got = to_arrow(load_with_python_source(reader, vectors))
        assert normalize(got) == _expected(vectors, start, end), (start, end)


def test_streaming_source_reads_the_vectors_in_its_tasks(
    spark: Any, vectors: str, tmp_path: Path
) -> None:
    if not HAS_STREAMING_SOURCES:
        pytest.skip("Python streaming sources with read limits need PySpark 4.2+")
    deltalog.register(spark)
    stream = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .option("maxFilesPerTrigger", 2)
        .load(vectors)
    )
    out = tmp_path / "out"
    query = (
        stream.writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(out))
    )
    query.awaitTermination()
    import deltalake

    got = deltalake.DeltaTable(str(out)).to_pyarrow_table()
    expected = read_plan(plan_changes(DeltaLog.for_table(vectors), CdfRange(0, 4)))
    assert got.num_rows == expected.num_rows
    assert pc.sum(pc.equal(got["_change_type"], "delete")).as_py() > ROWS // 2
    drop = ["_commit_timestamp"]
    assert canonical(got.drop_columns(drop)) == canonical(expected.drop_columns(drop))


@pytest.mark.connect
def test_parquet_reader_over_connect(connect_spark: Any, vectors: str) -> None:
    for engine in ("spark", "local"):
        with session_confs(connect_spark, {ENGINE: engine}):
            df = read_changes(connect_spark, vectors, starting_version=0, ending_version=3)
            assert normalize(to_arrow(df)) == _expected(vectors, 0, 3), engine
