"""The streaming source's planning without Spark: offsets, admission control, restarts, commits
that remove data, schema changes, the change feed, against deltalake and the inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import deltalog
from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.change_data_feed import CdfRange, plan_changes, read_change_file, read_plan
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.delta_log import DeltaLog
from deltalog.paths import resolve
from deltalog.streaming.offsets import DeltaSourceOffset
from deltalog.streaming.options import AdmissionLimits, SourceOptions
from deltalog.streaming.source_plan import SourcePlanner, StreamBatch
from tests.conformance.oracle import TABLES
from tests.conformance.rows import canonical, oracle_rows


def _append(path: Path, values: list[int], **kw: Any) -> None:
    deltalog.write_table(
        str(path), pa.table({"x": pa.array(values, pa.int64())}), mode="append", **kw
    )


def _planner(path: Path, **options: str) -> SourcePlanner:
    log = DeltaLog.for_table(str(path))
    snapshot = log.update()
    opts = SourceOptions.from_options(options, table=str(path))
    return SourcePlanner(log, opts, snapshot.schema, snapshot.metadata.id)


def _limits(planner: SourcePlanner) -> AdmissionLimits:
    return AdmissionLimits(planner.options.max_files, planner.options.max_bytes)


def _drain(
    planner: SourcePlanner, start: DeltaSourceOffset
) -> tuple[list[StreamBatch], DeltaSourceOffset]:
    """Every batch until no new data, as a query would run them."""
    batches = []
    while True:
        end = planner.latest_offset(start, _limits(planner))
        if end == start:
            return batches, start
        batches.append(planner.batch(start, end))
        start = end


def _files(batch: StreamBatch) -> list[dict[str, Any]]:
    out = batch.snapshot_files.to_pylist() if batch.snapshot_files is not None else []
    for commit in batch.commits:
        out += commit.files.to_pylist()
    return out


def _rows(planner: SourcePlanner, batches: list[StreamBatch]) -> pa.Table:
    """The rows the batches read (deletion vectors applied, logical columns)."""
    snapshot = planner.log.update()
    layout = TableLayout(
        snapshot.table_root,
        planner.read_schema,
        snapshot.partition_columns,
        snapshot.column_mapping_mode,
    )
    parts = []
    for batch in batches:
        for f in _files(batch):
            data = read_parquet(resolve(layout.table_root, f["path"]), layout.table_root)
            if f["deletionVector"] is not None:
                dv = DeletionVectorDescriptor.from_dict(f["deletionVector"])
                deleted = read_deletion_vector(planner.log.store, layout.table_root, dv)
                data = select_rows(data, deleted, keep_listed=False)
            values = dict(f["partitionValues"] or [])
            parts.append(
                to_logical(
                    data,
                    layout.schema,
                    layout.partition_columns,
                    layout.column_mapping_mode,
                    values,
                )
            )
    return pa.concat_tables(parts) if parts else layout.schema.to_arrow().empty_table()


def test_batches_read_snapshot_then_commits_once_each_and_resume_from_json(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    for i in range(5):
        _append(table, [i * 10 + j for j in range(3)])
    planner = _planner(table, maxFilesPerTrigger="2")
    start = planner.initial_offset()
    assert start == DeltaSourceOffset(4, -1, True, planner.table_id)
    first = planner.latest_offset(start, _limits(planner))
    first_batch = planner.batch(start, first)
    assert len(_files(first_batch)) == 2 and first.is_starting_version
    for i in range(5, 8):
        _append(table, [i * 10 + j for j in range(3)])
    # A restarted query: a new planner, the checkpointed offset as JSON.
    restarted = _planner(table, maxFilesPerTrigger="2")
    resumed = restarted.parse(json.loads(json.dumps(first.to_json())))
    batches, end = _drain(restarted, resumed)
    assert all(len(_files(b)) <= 2 for b in batches)
    assert end == DeltaSourceOffset(8, -1, False, planner.table_id)
    got = _rows(restarted, [first_batch, *batches])
    assert canonical(got) == canonical(oracle_rows(str(table)))
    assert sorted(got["x"].to_pylist()) == [i * 10 + j for i in range(8) for j in range(3)]
    # Nothing new: the offset stays, so Spark runs no batch.
    assert restarted.latest_offset(end, _limits(restarted)) == end


def test_byte_limit_is_soft_and_read_all_available_ignores_limits(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _append(table, [0])  # the snapshot: one file
    start = _planner(table).initial_offset().next_version()
    for i in range(1, 6):
        _append(table, list(range(i * 100, i * 100 + i * 50)))
    planner = _planner(table, maxBytesPerTrigger="1b")
    batches, _ = _drain(planner, start)
    assert [len(_files(b)) for b in batches] == [1] * 5  # each batch takes at least one file
    sizes = [f["size"] for b in batches for f in _files(b)]
    planner = _planner(table, maxBytesPerTrigger=str(sizes[0] + sizes[1] + 1))
    batches, _ = _drain(planner, start)
    # Files are admitted while the budget is positive: the third file overshoots.
    assert len(_files(batches[0])) == 3
    everything = planner.latest_offset(start, None)
    assert len(_files(planner.batch(start, everything))) == 5
    with pytest.raises(errors.InvalidArgumentError, match="maxFilesPerTrigger"):
        SourceOptions.from_options({"maxFilesPerTrigger": "0"}, table="t")


def test_starting_version_latest_timestamp_and_available_now(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for i in range(3):
        _append(table, [i])
    from_two = _planner(table, startingVersion="2")
    assert from_two.initial_offset() == DeltaSourceOffset(2, -1, False, from_two.table_id)
    batches, _ = _drain(from_two, from_two.initial_offset())
    assert _rows(from_two, batches)["x"].to_pylist() == [2]
    latest = _planner(table, startingVersion="latest")
    start = latest.initial_offset()
    assert latest.latest_offset(start, None) == start
    with pytest.raises(errors.VersionNotFoundError):
        _planner(table, startingVersion="9").initial_offset()
    times = [r.timestamp for r in DeltaLog.for_table(str(table)).commit_records()]
    by_time = _planner(table, startingTimestamp=str(times[1]))
    assert by_time.initial_offset().reservoir_version == 1
    now = _planner(table, startingVersion="0")
    now.prepare_available_now()
    _append(table, [3])  # after the trigger started: not read by this run
    batches, end = _drain(now, now.initial_offset())
    assert sorted(_rows(now, batches)["x"].to_pylist()) == [0, 1, 2]
    assert end == DeltaSourceOffset(3, -1, False, now.table_id)


def _with_delete_and_update(table: Path) -> None:
    _append(table, [1, 2, 3])  # v0
    _append(table, [10, 11])  # v1
    deltalog.delete(str(table), "x >= 10")  # v2: removes the whole file only
    _append(table, [20])  # v3
    deltalog.update(str(table), "x = 1", {"x": 100})  # v4: rewrites a file (remove + add)
    _append(table, [30])  # v5


@pytest.mark.parametrize(
    ("options", "error_class", "expected"),
    [
        ({}, "DELTA_SOURCE_IGNORE_DELETE", None),
        ({"ignoreDeletes": "true"}, "DELTA_SOURCE_TABLE_IGNORE_CHANGES", None),
        ({"skipChangeCommits": "true"}, None, [1, 2, 3, 10, 11, 20, 30]),
        # Legacy ignoreChanges: the rewritten file comes out again, duplicates included.
        ({"ignoreChanges": "true"}, None, [1, 2, 3, 10, 11, 20, 100, 2, 3, 30]),
    ],
)
def test_commits_that_remove_data_per_option(
    tmp_path: Path, options: dict[str, str], error_class: str | None, expected: list[int] | None
) -> None:
    table = tmp_path / "t"
    _with_delete_and_update(table)
    planner = _planner(table, startingVersion="0", **options)
    if error_class is not None:
        with pytest.raises(errors.UnsupportedFeatureError) as info:
            _drain(planner, planner.initial_offset())
        assert info.value.error_class == error_class
        assert ("version 2" if error_class.endswith("DELETE") else "version 4") in str(info.value)
        return
    batches, _ = _drain(planner, planner.initial_offset())
    assert sorted(_rows(planner, batches)["x"].to_pylist()) == sorted(expected or [])


def test_schema_change_fails_the_stream_and_a_restart_reads_on(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _append(table, [1])
    old = _planner(table, startingVersion="0")
    start = old.initial_offset()
    wider = pa.table({"x": pa.array([2], pa.int64()), "y": pa.array(["b"])})
    deltalog.write_table(str(table), wider, mode="append", schema_mode="merge")
    with pytest.raises(errors.InvalidTableError) as info:
        _drain(old, start)
    assert info.value.error_class == "DELTA_SCHEMA_CHANGED_WITH_VERSION"
    assert "version 1" in str(info.value)
    restarted = _planner(table, startingVersion="0")  # reads with the new schema
    batches, _ = _drain(restarted, start)
    got = _rows(restarted, batches).sort_by("x")
    assert got.to_pylist() == [{"x": 1, "y": None}, {"x": 2, "y": "b"}]


def test_an_offset_of_another_table_is_refused(tmp_path: Path) -> None:
    _append(tmp_path / "a", [1])
    _append(tmp_path / "b", [1])
    offset = _planner(tmp_path / "a").initial_offset().to_json()
    with pytest.raises(errors.InvalidTableError) as info:
        _planner(tmp_path / "b").parse(offset)
    assert info.value.error_class == "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"


def test_deletion_vectors_and_column_mapping_read_as_deltalake_does() -> None:
    root = TABLES / "delta-golden/dv-with-columnmapping"
    planner = _planner(root, maxFilesPerTrigger="3")
    batches, _ = _drain(planner, planner.initial_offset())
    assert len(batches) > 1
    assert canonical(_rows(planner, batches)) == canonical(oracle_rows(str(root)))


def _change_rows(planner: SourcePlanner, batches: list[StreamBatch]) -> pa.Table:
    layout = TableLayout.of(planner.log.update())
    parts = []
    for batch in batches:
        for commit in batch.commits:
            for spec in commit.files.to_pylist():
                parts.append(read_change_file(layout, spec))
    return pa.concat_tables(parts)


def test_change_feed_stream_equals_the_batch_change_feed(tmp_path: Path) -> None:
    table = tmp_path / "t"
    properties = {"delta.enableChangeDataFeed": "true"}
    _append(table, [1, 2, 3], configuration=properties)
    _append(table, [4, 5])
    deltalog.update(str(table), "x = 2", {"x": 20})
    deltalog.delete(str(table), "x >= 4 AND x <= 5")
    planner = _planner(table, startingVersion="0", readChangeFeed="true", maxFilesPerTrigger="1")
    batches, _ = _drain(planner, planner.initial_offset())
    # Commits are never split: one commit per batch here, whatever the file limit.
    assert [[c.version for c in b.commits] for b in batches] == [[0], [1], [2], [3]]
    log = DeltaLog.for_table(str(table))
    expected = read_plan(plan_changes(log, CdfRange(0, log.update().version)))
    got = _change_rows(planner, batches)
    assert canonical(got) == canonical(expected)
    kinds = sorted(got["_change_type"].to_pylist())
    assert kinds.count("update_preimage") == 1 and kinds.count("delete") == 2
    np.testing.assert_array_equal(np.unique(got["_commit_version"].to_numpy()), np.arange(4))


def test_a_batch_from_the_snapshot_reads_on_into_later_commits(tmp_path: Path) -> None:
    """``getFileChanges`` of an initial snapshot: the snapshot, then the commits after it
    while the budget lasts; ``Trigger.Once`` (no limits) takes everything available."""
    table = tmp_path / "t"
    _append(table, [0])
    _append(table, [1])
    once = _planner(table)
    start = once.initial_offset()
    assert start == DeltaSourceOffset(1, -1, True, once.table_id)
    _append(table, [2])  # committed after the query started, before its first batch
    _append(table, [3])
    end = once.latest_offset(start, None)
    assert end == DeltaSourceOffset(4, -1, False, once.table_id)
    assert sorted(_rows(once, [once.batch(start, end)])["x"].to_pylist()) == [0, 1, 2, 3]
    # With a budget: the two snapshot files, then one commit; the next batch reads the last.
    limited = _planner(table, maxFilesPerTrigger="3")
    start = DeltaSourceOffset(1, -1, True, limited.table_id)
    first = limited.latest_offset(start, _limits(limited))
    assert first == DeltaSourceOffset(3, -1, False, limited.table_id)
    batches, end = _drain(limited, first)
    got = _rows(limited, [limited.batch(start, first), *batches])
    assert sorted(got["x"].to_pylist()) == [0, 1, 2, 3]
    assert end == DeltaSourceOffset(4, -1, False, limited.table_id)


def test_commits_removed_by_log_cleanup_fail_the_stream_unless_fail_on_data_loss_is_false(
    tmp_path: Path,
) -> None:
    from deltalog.log.cleanup import cleanup_expired_logs

    table = tmp_path / "t"
    for i in range(6):
        _append(table, [i])
    log = DeltaLog.for_table(str(table))
    log.checkpoint(log.get_snapshot_at(3))
    later = max(r.timestamp for r in log.commit_records()) + 2 * 86_400_000
    deleted = cleanup_expired_logs(
        log.store, log.log_root, retention_ms=0, now_ms=later, table=str(table)
    )
    assert sorted(Path(p).name for p in deleted if p.endswith(".json")) == [
        f"{v:020d}.json" for v in range(3)
    ]
    # And a gap: version 4's commit lost (the latest state is in version 5's checkpoint).
    log.checkpoint(log.get_snapshot_at(5))
    (table / "_delta_log" / f"{4:020d}.json").unlink()
    DeltaLog.clear_cache()
    planner = _planner(table)
    # Queries whose checkpoints say they have read up to version 0, and up to version 3.
    for resumed, (start, earliest) in [(1, (1, 3)), (4, (4, 5))]:
        offset = DeltaSourceOffset(resumed, -1, False, planner.table_id)
        with pytest.raises(errors.InvalidTableError) as info:
            planner.latest_offset(offset, _limits(planner))
        assert info.value.error_class == "DELTA_MISSING_FILES_UNEXPECTED_VERSION"
        message = f"from version {start}; transaction log starts at {earliest}"
        assert message in str(info.value)
        assert 'option("failOnDataLoss", "false")' in str(info.value)
    lenient = _planner(table, failOnDataLoss="false")
    batches, end = _drain(lenient, DeltaSourceOffset(1, -1, False, lenient.table_id))
    assert sorted(_rows(lenient, batches)["x"].to_pylist()) == [3, 5]
    assert end == DeltaSourceOffset(6, -1, False, lenient.table_id)


def test_ignore_file_deletion_is_deprecated_and_lets_changes_through(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _with_delete_and_update(table)
    with pytest.warns(FutureWarning, match="ignoreFileDeletion"):
        planner = _planner(table, startingVersion="0", ignoreFileDeletion="true")
    batches, _ = _drain(planner, planner.initial_offset())
    # As ignoreChanges: the rewritten file comes out again.
    assert sorted(_rows(planner, batches)["x"].to_pylist()) == sorted(
        [1, 2, 3, 10, 11, 20, 100, 2, 3, 30]
    )


_PLAN_IN_A_FRESH_PROCESS = """
import json, sys
from deltalog.delta_log import DeltaLog
from deltalog.streaming.options import AdmissionLimits, SourceOptions
from deltalog.streaming.source_plan import SourcePlanner

path = sys.argv[1]
log = DeltaLog.for_table(path)
snapshot = log.update()
options = {"startingVersion": "0", "maxFilesPerTrigger": "2", "excludeRegex": "never-matches"}
planner = SourcePlanner(
    log, SourceOptions.from_options(options, table=path), snapshot.schema, snapshot.metadata.id
)
planner.prepare_available_now()
start, paths = planner.initial_offset(), []
limits = lambda: AdmissionLimits(planner.options.max_files, planner.options.max_bytes)  # noqa
while (end := planner.latest_offset(start, limits())) != start:
    paths += [f["path"] for c in planner.batch(start, end).commits for f in c.files.to_pylist()]
    planner.forget_before(end)
    start = end
print(json.dumps({"paths": paths, "modules": sorted(sys.modules)}))
"""


def test_planning_a_stream_imports_neither_pandas_nor_pyarrow_compute(tmp_path: Path) -> None:
    """Spark plans each streaming query in a fresh Python process: pandas (which pyarrow's
    ``pa.array`` and ``to_numpy`` import) and pyarrow.compute would be paid at every start."""
    table = tmp_path / "t"
    for i in range(5):
        _append(table, [i, i + 10])
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", _PLAN_IN_A_FRESH_PROCESS, str(table)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result = json.loads(out.stdout.splitlines()[-1])
    expected = [p for v in range(5) for p in _added_paths(table, v)]
    assert result["paths"] == expected  # every commit's add, in commit order, once
    assert not {"pandas", "pyarrow.compute"} & set(result["modules"])


def _added_paths(table: Path, version: int) -> list[str]:
    """The paths a commit adds, read from its JSON (the inputs, not the planner)."""
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    actions = [json.loads(line) for line in lines]
    return [a["add"]["path"] for a in actions if "add" in a]
