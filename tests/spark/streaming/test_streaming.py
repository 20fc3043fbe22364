"""Structured Streaming with Delta tables as source and sink on a real session: exactly once
across restarts, replays and a SIGKILL, the change feed, deletes per option, ``foreachBatch``
upserts; deltalake reads every sink."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from tests.conformance.cdf import commit_times_from_commit_info, normalize, oracle_changes

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        importlib.util.find_spec("pyspark.sql.datasource") is None,
        reason="Python streaming data sources need PySpark 4.0+",
    ),
]


def _append(path: Path, values: list[int], **kw: Any) -> None:
    data = pa.table({"x": pa.array(values, pa.int64())})
    deltalog.write_table(str(path), data, mode="append", **kw)


def _stream(spark: Any, path: Path, **options: Any) -> Any:
    reader = spark.readStream.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(path))


def _to_delta(df: Any, sink: Path, checkpoint: Path, **options: Any) -> Any:
    writer = df.writeStream.format("delta").option("checkpointLocation", str(checkpoint))
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start(str(sink))


def _xs(path: Path) -> list[int]:
    return sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table()["x"].to_pylist())


def _env() -> dict[str, str]:
    return dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONPATH=os.pathsep.join([*sys.path, os.environ.get("PYTHONPATH", "")]),
    )


@pytest.fixture(autouse=True)
def _registered(spark: Any) -> None:
    deltalog.register(spark)


def test_source_to_sink_exactly_once_and_a_replayed_batch_is_skipped(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql.streaming import StreamingQuery

    from deltalog.spark.streaming.sink import DeltaStreamSink, write_batch

    src, sink, ckpt = tmp_path / "src", tmp_path / "sink", tmp_path / "ckpt"
    for i in range(3):
        _append(src, [i * 10, i * 10 + 1])
    query = _to_delta(_stream(spark, src, maxFilesPerTrigger=2), sink, ckpt)
    query.awaitTermination()
    # The snapshot's three files in two batches of at most two files.
    assert [p["numInputRows"] for p in query.recentProgress] == [4, 2]
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert (end["reservoirVersion"], end["index"], end["isStartingVersion"]) == (3, -1, False)
    table = deltalake.DeltaTable(str(sink))
    assert _xs(sink) == [0, 1, 10, 11, 20, 21]
    assert table.transaction_version(query.id) == 1
    history = table.history()
    assert {h["operation"] for h in history} == {"STREAMING UPDATE"}
    latest = history[0]
    assert latest["operationParameters"] == {
        "outputMode": "Append",
        "queryId": query.id,
        "epochId": "1",
    }
    assert latest["operationMetrics"]["numOutputRows"] == "2"

    # The progress shows the source's offsets and, per batch, the sink's Delta version.
    assert isinstance(query, StreamingQuery)
    assert [p["sink"]["metrics"]["committedVersion"] for p in query.recentProgress] == ["0", "1"]
    last = query.lastProgress
    assert last["sink"]["description"] == f"DeltaSink[{sink}]"
    assert last["sink"]["numOutputRows"] == 2
    start = json.loads(last["sources"][0]["startOffset"])
    assert (start["reservoirVersion"], start["index"], start["isStartingVersion"]) == (2, 1, True)

    # Trigger.Once from the checkpoint: one batch with everything available, whatever the limit.
    _append(src, [30])
    _append(src, [40])
    once = (
        _stream(spark, src, maxFilesPerTrigger=1)
        .writeStream.format("delta")
        .option("checkpointLocation", str(ckpt))
        .trigger(once=True)
        .start(str(sink))
    )
    once.awaitTermination()
    assert [p["numInputRows"] for p in once.recentProgress] == [2]
    assert once.lastProgress["sink"]["metrics"] == {"committedVersion": "2"}
    assert _xs(sink) == [0, 1, 10, 11, 20, 21, 30, 40]

    # Spark replays the last batch after a failure: the sink skips what the table has.
    sink_fn = DeltaStreamSink.create(str(sink), "append", None, {"checkpointLocation": ckpt})
    rows = spark.range(3).selectExpr("id * 1000 AS x")
    version = deltalake.DeltaTable(str(sink)).version()
    assert write_batch(sink_fn, rows, 2) is None
    assert deltalake.DeltaTable(str(sink)).version() == version
    assert write_batch(sink_fn, rows, 3) == version + 1
    assert _xs(sink) == [0, 0, 1, 10, 11, 20, 21, 30, 40, 1000, 2000]
    # A new column needs mergeSchema, as in delta-spark's sink.
    wider = spark.range(1).selectExpr("id + 5 AS x", "'new' AS y")
    with pytest.raises(deltalog.DeltaError, match="DELTA_METADATA_MISMATCH"):
        write_batch(sink_fn, wider, 4)
    merging = DeltaStreamSink.create(
        str(sink), "append", None, {"checkpointLocation": ckpt, "mergeSchema": "true"}
    )
    write_batch(merging, wider, 4)
    merged = deltalake.DeltaTable(str(sink))
    assert merged.schema().to_arrow().names == ["x", "y"]
    assert merged.transaction_version(query.id) == 4


def test_change_feed_stream_and_deletes_per_option(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _append(src, [1, 2, 3], configuration={"delta.enableChangeDataFeed": "true"})
    _append(src, [4, 5])
    deltalog.update(str(src), "x = 2", {"x": 20})
    deltalog.delete(str(src), "x >= 4 AND x <= 5")
    commit_times_from_commit_info(src)
    changes = _stream(spark, src, readChangeFeed="true", startingVersion=0)
    _to_delta(changes, tmp_path / "cdf", tmp_path / "c1").awaitTermination()
    got = deltalake.DeltaTable(str(tmp_path / "cdf")).to_pyarrow_table()
    assert normalize(got) == normalize(oracle_changes(str(src), 0, None))

    failing = _to_delta(_stream(spark, src, startingVersion=0), tmp_path / "s2", tmp_path / "c2")
    with pytest.raises(Exception, match="DELTA_SOURCE_TABLE_IGNORE_CHANGES"):
        failing.awaitTermination()
    skipping = _stream(spark, src, startingVersion=0, skipChangeCommits="true")
    _to_delta(skipping, tmp_path / "s3", tmp_path / "c3").awaitTermination()
    assert _xs(tmp_path / "s3") == [1, 2, 3, 4, 5]


def test_foreach_batch_merge_upsert_complete_mode_and_idempotent_writes(
    spark: Any, tmp_path: Path
) -> None:
    from deltalog.spark.api.delta_table import DeltaTable

    src, target, audit = tmp_path / "src", tmp_path / "target", tmp_path / "audit"
    data = [{"id": [1, 2], "v": ["a", "b"]}, {"id": [2, 3], "v": ["B", "c"]}]
    for rows in data:
        deltalog.write_table(str(src), pa.table(rows), mode="append")
    deltalog.write_table(str(target), pa.table({"id": [1, 9], "v": ["old", "z"]}))

    def upsert(df: Any, batch_id: int) -> None:
        (
            DeltaTable.forPath(spark, str(target))
            .alias("t")
            .merge(df.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
        (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", "audit-app")
            .option("txnVersion", batch_id)
            .save(str(audit))
        )

    query = (
        _stream(spark, src, maxFilesPerTrigger=1)
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(tmp_path / "c1"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    merged = deltalake.DeltaTable(str(target)).to_pyarrow_table().sort_by("id").to_pylist()
    assert merged == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "B"},
        {"id": 3, "v": "c"},
        {"id": 9, "v": "z"},
    ]
    version = deltalake.DeltaTable(str(audit)).version()
    replayed = spark.createDataFrame([(7, "dup")], "id long, v string")
    replayed.write.format("delta").mode("append").option("txnAppId", "audit-app").option(
        "txnVersion", 1
    ).save(str(audit))
    assert deltalake.DeltaTable(str(audit)).version() == version
    assert deltalake.DeltaTable(str(audit)).transaction_version("audit-app") == 1

    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # one state store partition
    try:
        counts = _stream(spark, src).groupBy("id").count()
        complete = (
            counts.writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(tmp_path / "c2"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "counts"))
        )
        complete.awaitTermination()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    out = deltalake.DeltaTable(str(tmp_path / "counts"))
    assert sorted(out.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "count": 1},
        {"id": 2, "count": 2},
        {"id": 3, "count": 1},
    ]
    assert out.history()[0]["operationParameters"]["outputMode"] == "Complete"
    with pytest.raises(deltalog.DeltaError, match="DELTA_UNSUPPORTED_OUTPUT_MODE"):
        counts.writeStream.format("delta").outputMode("update").start(str(tmp_path / "u"))


_APPENDER = """
import sys, time
import pyarrow as pa
import deltalog
for i in range(1, 5):
    time.sleep(0.7)
    deltalog.write_table(sys.argv[1], pa.table({"x": pa.array([i * 10, i * 10 + 1], pa.int64())}),
                         mode="append")
"""


def test_processing_time_query_while_another_process_appends(spark: Any, tmp_path: Path) -> None:
    src, sink = tmp_path / "src", tmp_path / "sink"
    _append(src, [0, 1])
    query = (
        _stream(spark, src)
        .writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start(str(sink))
    )
    try:
        # The first micro-batch (the snapshot) is in before the other process starts appending,
        # so the appends arrive in later batches however slowly the query starts.
        deadline = time.monotonic() + 180
        while not (sink / "_delta_log").exists() and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.5)
        subprocess.run(
            [sys.executable, "-c", _APPENDER, str(src)], env=_env(), check=True, timeout=120
        )
        expected = [i * 10 + j for i in range(5) for j in range(2)]
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if (sink / "_delta_log").exists() and len(_xs(sink)) >= len(expected):
                break
            assert query.exception() is None
            time.sleep(1)
    finally:
        query.stop()
    assert _xs(sink) == expected
    epochs = {
        h["operationParameters"]["epochId"] for h in deltalake.DeltaTable(str(sink)).history()
    }
    assert len(epochs) >= 2  # the appends arrived over several micro-batches


_KILLED = """
import os, signal, sys
from pyspark.sql import SparkSession
import deltalog
import deltalog.spark.streaming.sink as sink_module
src, sink, ckpt = sys.argv[1:4]
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
deltalog.register(spark)
original = sink_module.commit_write

def commit_or_die(plan, adds, **kw):
    if plan.options.txn_version == 1:  # batch 1: its files are written, its commit never is
        os.kill(os.getpid(), signal.SIGKILL)
    return original(plan, adds, **kw)

sink_module.commit_write = commit_or_die
(spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
 .writeStream.format("delta").option("checkpointLocation", ckpt)
 .trigger(availableNow=True).start(sink).awaitTermination())
"""


@pytest.mark.processes
def test_sigkill_between_writing_files_and_committing(spark: Any, tmp_path: Path) -> None:
    src, sink, ckpt = tmp_path / "src", tmp_path / "sink", tmp_path / "ckpt"
    _append(src, [1, 2])
    _append(src, [3, 4])
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(src), str(sink), str(ckpt)],
        env=_env(),
        timeout=300,
        capture_output=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    table = deltalake.DeltaTable(str(sink))
    assert table.version() == 0 and len(_xs(sink)) == 2  # batch 0 only
    written = {p.name for p in sink.glob("*.parquet")}
    assert len(written) > len(table.file_uris())  # batch 1's files, never committed

    # Restarted from the checkpoint (and the source moved on): batch 1 is re-run, then the rest.
    _append(src, [5, 6])
    restart = _to_delta(_stream(spark, src, maxFilesPerTrigger=1), sink, ckpt)
    restart.awaitTermination()
    assert _xs(sink) == [1, 2, 3, 4, 5, 6]
    restarted = deltalake.DeltaTable(str(sink))
    assert restarted.version() == 2
    assert restarted.transaction_version(restart.id) == 2
    assert {h["operationParameters"]["queryId"] for h in restarted.history()} == {restart.id}


def test_streams_by_table_name(spark: Any, tmp_path: Path) -> None:
    """``readStream.table`` of a Delta name and ``toTable`` of a new name (a managed table
    recorded in deltalog's catalog) stream between the names' locations."""
    from deltalog.tables import DeltaTable

    spark.range(4).selectExpr("id AS x").write.format("delta").saveAsTable("stream_src")
    try:
        query = (
            spark.readStream.table("stream_src")
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .toTable("stream_dst")
        )
        query.awaitTermination()
        location = DeltaTable.forName(spark, "stream_dst").detail().collect()[0]["location"]
        assert _xs(Path(location.removeprefix("file:"))) == [0, 1, 2, 3]
    finally:
        spark.sql("DROP TABLE IF EXISTS stream_src")
        spark.sql("DROP TABLE IF EXISTS stream_dst")
