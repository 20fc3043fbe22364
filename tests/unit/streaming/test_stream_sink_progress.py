"""The Delta sink's part of a streaming query's progress without Spark: the version holding
each batch, found in the sink table's log by its ``txn``, written into a progress's JSON."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa

import deltalog
from deltalog.delta_log import DeltaLog
from deltalog.streaming.sink_progress import (
    SinkCommit,
    find_batch_commits,
    with_sink_progress,
)


def _batch(path: Path, app: str, batch_id: int, rows: int) -> None:
    data = pa.table({"x": pa.array(range(rows), pa.int64())})
    deltalog.write_table(str(path), data, mode="append", txn_app_id=app, txn_version=batch_id)


def test_batches_are_found_by_their_txn_and_the_search_stops_early(tmp_path: Path) -> None:
    sink = tmp_path / "sink"
    _batch(sink, "query-a", 0, 1)  # v0
    _batch(sink, "query-b", 0, 2)  # v1: another query writing the same table
    _batch(sink, "query-a", 1, 3)  # v2
    deltalog.write_table(str(sink), pa.table({"x": pa.array([9], pa.int64())}), mode="append")
    _batch(sink, "query-a", 2, 4)  # v4
    table = deltalake.DeltaTable(str(sink))
    assert table.transaction_version("query-a") == 2
    log = DeltaLog.for_table(str(sink))
    found = find_batch_commits(log, "query-a", {0, 1, 2, 3})
    # Batch 3 has not run (an idle progress names the next batch): nothing claims it.
    assert found == {0: SinkCommit(0, 1), 1: SinkCommit(2, 3), 2: SinkCommit(4, 4)}
    assert find_batch_commits(log, "query-b", {0}) == {0: SinkCommit(1, 2)}
    # The newest commit of the query records batch 2: older batches are not searched for a
    # batch after it, and the limit bounds the search.
    assert find_batch_commits(log, "query-a", {3}) == {}
    assert find_batch_commits(log, "query-a", {0}, limit=2) == {}
    assert find_batch_commits(DeltaLog.for_table(str(tmp_path / "none")), "q", {0}) == {}


def test_progress_json_names_the_sink_and_its_version() -> None:
    progress = {
        "batchId": 4,
        "sources": [{"startOffset": None, "endOffset": {"reservoirVersion": 3}}],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
    }
    out = with_sink_progress(progress, "/data/t", {4: SinkCommit(7, 12)})
    assert out["sink"] == {
        "description": "DeltaSink[/data/t]",
        "numOutputRows": 12,
        "metrics": {"committedVersion": "7"},
    }
    assert out["sources"] == progress["sources"]
    assert progress["sink"]["description"] == "ForeachBatchSink"  # the input is not changed
    idle = with_sink_progress({**progress, "batchId": 5}, "/data/t", {4: SinkCommit(7, 12)})
    assert idle["sink"] == {
        "description": "DeltaSink[/data/t]",
        "numOutputRows": -1,
        "metrics": {},
    }
