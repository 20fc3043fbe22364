"""The change data feed (engine-free plan + pyarrow rows) against deltalake's ``load_cdf``, on
the shared change-feed tables and on tables written here, for every range; and each edge of
version resolution against the reference's rules."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors
from deltalog.change_data_feed import (
    CdfBounds,
    CdfRange,
    is_cdc_read,
    plan_changes,
    read_plan,
    resolve_range,
)
from tests.conformance.cdf import (
    CDF_TABLES,
    commit_times_from_commit_info,
    normalize,
    oracle_changes,
)
from tests.conformance.oracle import TABLES

CDF_ON = {"delta.enableChangeDataFeed": "true"}


def _changes(root: str, start: int, end: int | None = None) -> pa.Table:
    log = DeltaLog.for_table(root)
    options = {"startingVersion": str(start)}
    if end is not None:
        options["endingVersion"] = str(end)
    return read_plan(plan_changes(log, resolve_range(log, CdfBounds.from_options(options))))


def _ranges(first: int, last: int) -> list[tuple[int, int]]:
    if last - first <= 8:
        return [(s, e) for s in range(first, last + 1) for e in range(s, last + 1)]
    # Long logs: every start to the end, every end from the start, and each single version.
    out = {(s, last) for s in range(first, last + 1)} | {(first, e) for e in range(first, last)}
    return sorted(out | {(v, v) for v in range(first, last + 1)})


def _assert_same(root: str, start: int, end: int) -> None:
    ours = _changes(root, start, end)
    theirs = oracle_changes(root, start, end)
    assert normalize(ours) == normalize(theirs), f"{root} [{start}, {end}]"


def _earliest(root: str) -> int:
    return min(r.version for r in DeltaLog.for_table(root).commit_records(recreatable_only=True))


@pytest.mark.parametrize("rel", CDF_TABLES)
def test_shared_tables_every_range(rel: str, copy_table: Any) -> None:
    root = copy_table(rel)
    commit_times_from_commit_info(root)
    first, last = _earliest(str(root)), DeltaLog.for_table(str(root)).update().version
    for start, end in _ranges(first, last):
        _assert_same(str(root), start, end)


def test_timestamps_are_the_commit_file_times_as_the_reference_dates_them() -> None:
    # Untouched copy: mtimes differ from commitInfo.timestamp, which deltalake reports.
    root = str(TABLES / "delta-rs/cdf-table")
    ours = _changes(root, 0)
    expected = {r.version: r.timestamp for r in DeltaLog.for_table(root).commit_records()}
    stamps = ours["_commit_timestamp"].cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
    versions = ours["_commit_version"].to_pylist()
    assert {v: ts // 1000 for v, ts in zip(versions, stamps, strict=True)} == expected
    theirs = oracle_changes(root, 0, None)
    assert normalize(ours, with_timestamps=False) == normalize(theirs, with_timestamps=False)


def test_a_start_before_the_recreatable_history_is_refused() -> None:
    root = str(TABLES / "delta-rs/checkpoint-cdf-table")
    with pytest.raises(errors.VersionNotFoundError):
        _changes(root, 0)


# -- tables written here -----------------------------------------------------------------------


def _write_history(root: Path, partition_by: list[str] | None) -> None:
    """Appends, a delete, an update, a merge, an overwrite, an append and an OPTIMIZE."""
    data = pa.table(
        {
            "id": pa.array(range(12), pa.int64()),
            "g": pa.array([f"g{i % 3}" for i in range(12)]),
            "value": pa.array([i * 1.5 for i in range(12)]),
        }
    )
    path = str(root)
    deltalake.write_deltalake(path, data, partition_by=partition_by, configuration=CDF_ON)
    deltalake.write_deltalake(path, data.slice(0, 4), mode="append")
    dt = deltalake.DeltaTable(path)
    dt.delete("id = 1")
    dt.update(predicate="id >= 8", updates={"value": "value + 100"})
    source = pa.table(
        {
            "id": pa.array([2, 3, 40], pa.int64()),
            "g": pa.array(["g2", "g0", "g1"]),
            "value": pa.array([-2.0, -3.0, 40.0]),
        }
    )
    (
        dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    deltalake.write_deltalake(path, data.slice(5, 5), mode="overwrite", partition_by=partition_by)
    deltalake.write_deltalake(path, data.slice(0, 2), mode="append")
    deltalake.DeltaTable(path).optimize.compact()
    commit_times_from_commit_info(root)


@pytest.fixture(scope="module", params=[["g"], None], ids=["partitioned", "flat"])
def written(request: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cdf") / "t"
    _write_history(root, request.param)
    return str(root)


def test_written_tables_every_range(written: str) -> None:
    last = DeltaLog.for_table(written).update().version
    assert last == 7
    for start, end in _ranges(0, last):
        _assert_same(written, start, end)


def test_what_each_operation_contributes(written: str) -> None:
    kinds = {}
    for version in range(8):
        changes = _changes(written, version, version)
        kinds[version] = sorted(set(changes["_change_type"].to_pylist()))
    assert kinds == {
        0: ["insert"],
        1: ["insert"],
        2: ["delete"],
        3: ["update_postimage", "update_preimage"],
        4: ["insert", "update_postimage", "update_preimage"],
        5: ["delete", "insert"],
        6: ["insert"],
        7: [],  # OPTIMIZE: dataChange=false
    }


# -- version resolution ---------------------------------------------------------------------


def _resolve(root: str, **options: str) -> CdfRange:
    log = DeltaLog.for_table(root)
    return resolve_range(log, CdfBounds.from_options(options, table=log.table_root))


def _commit_ms(root: str) -> list[int]:
    return [r.timestamp for r in DeltaLog.for_table(root).commit_records()]


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def test_versions_and_defaults(written: str) -> None:
    assert _resolve(written, startingVersion="2") == CdfRange(2, 7)
    assert _resolve(written, startingVersion="2", endingVersion="4") == CdfRange(2, 4)
    assert _resolve(written, startingVersion="2", endingVersion="99") == CdfRange(2, 7)
    assert _resolve(written, STARTINGVERSION="3", endingversion="3") == CdfRange(3, 3)


def test_version_keys_win_over_timestamp_keys(written: str) -> None:
    ts = _commit_ms(written)
    got = _resolve(
        written,
        startingVersion="1",
        startingTimestamp=_iso(ts[5]),
        endingVersion="2",
        endingTimestamp=_iso(ts[6]),
    )
    assert got == CdfRange(1, 2)


def test_timestamps_resolve_on_commit_times(written: str) -> None:
    ts = _commit_ms(written)
    # Exactly at a commit: that commit, for both ends.
    assert _resolve(written, startingTimestamp=_iso(ts[2]), endingTimestamp=_iso(ts[4])) == (
        CdfRange(2, 4)
    )
    # Between commits: the start moves to the next commit, the end to the previous one.
    between = ts[2] + (ts[3] - ts[2]) // 2
    if ts[3] - ts[2] >= 2:
        assert _resolve(written, startingTimestamp=_iso(between)) == CdfRange(3, 7)
        assert _resolve(written, startingVersion="0", endingTimestamp=_iso(between)) == CdfRange(
            0, 2
        )
        # Both between the same two commits: an empty range, not an error.
        empty = _resolve(written, startingTimestamp=_iso(between), endingTimestamp=_iso(between))
        assert (
            empty.is_empty
            and read_plan(plan_changes(DeltaLog.for_table(written), empty)).num_rows == 0
        )
    # Before the first commit: the start is version 0.
    assert _resolve(written, startingTimestamp=_iso(ts[0] - 60_000)) == CdfRange(0, 7)


@pytest.mark.parametrize(
    ("options", "error", "error_class"),
    [
        ({}, errors.InvalidArgumentError, "DELTA_NO_START_FOR_CDC_READ"),
        ({"endingVersion": "3"}, errors.InvalidArgumentError, "DELTA_NO_START_FOR_CDC_READ"),
        (
            {"startingVersion": "8"},
            errors.VersionNotFoundError,
            "DELTA_CDC_START_VERSION_AFTER_LATEST",
        ),
        (
            {"startingVersion": "4", "endingVersion": "2"},
            errors.InvalidArgumentError,
            "DELTA_INVALID_CDC_RANGE",
        ),
        ({"startingVersion": "x"}, errors.InvalidArgumentError, "DELTA_VERSION_INVALID"),
        ({"startingVersion": "-1"}, errors.InvalidArgumentError, "DELTA_VERSION_INVALID"),
        (
            {"startingTimestamp": "not a time"},
            errors.InvalidArgumentError,
            "DELTA_TIMESTAMP_INVALID",
        ),
    ],
)
def test_bad_ranges(written: str, options: dict[str, str], error: type, error_class: str) -> None:
    with pytest.raises(error) as info:
        _resolve(written, **options)
    assert info.value.error_class == error_class
    assert written in str(info.value)  # every message names the table


def test_timestamps_outside_the_history(written: str) -> None:
    ts = _commit_ms(written)
    after = _iso(ts[-1] + 60_000)
    with pytest.raises(errors.TimestampOutOfRangeError) as info:
        _resolve(written, startingTimestamp=after)
    assert info.value.error_class == "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"
    with pytest.raises(errors.TimestampOutOfRangeError) as info:
        _resolve(written, startingVersion="0", endingTimestamp=after)
    assert info.value.error_class == "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"
    with pytest.raises(errors.TimestampOutOfRangeError) as info:
        _resolve(written, startingVersion="0", endingTimestamp=_iso(ts[0] - 60_000))
    assert info.value.error_class == "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION"
    # The end exactly at the latest commit is fine; a start timestamp later than the end's too
    # far apart is an invalid range.
    assert _resolve(written, startingVersion="0", endingTimestamp=_iso(ts[-1])) == CdfRange(0, 7)
    with pytest.raises(errors.InvalidArgumentError) as info:
        _resolve(written, startingTimestamp=_iso(ts[5]), endingTimestamp=_iso(ts[2]))
    assert info.value.error_class == "DELTA_INVALID_CDC_RANGE"


def test_read_change_feed_option_values() -> None:
    assert is_cdc_read({"readChangeFeed": "true"})
    assert is_cdc_read({"READCHANGEFEED": "TRUE"})
    assert is_cdc_read({"readChangeData": "true"})  # legacy name
    assert not is_cdc_read({"readChangeFeed": "false"})
    assert not is_cdc_read({})
    with pytest.raises(errors.InvalidArgumentError) as info:
        is_cdc_read({"readChangeFeed": "yes"})
    assert info.value.error_class == "DELTA_ILLEGAL_OPTION"


# -- the feed must be on over the whole range ------------------------------------------------


def test_feed_not_enabled_at_the_start_or_disabled_inside(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    deltalake.write_deltalake(str(root), data)  # v0: feed off
    dt = deltalake.DeltaTable(str(root))
    dt.alter.set_table_properties(CDF_ON)  # v1: on
    deltalake.write_deltalake(str(root), data, mode="append")  # v2
    dt = deltalake.DeltaTable(str(root))
    dt.alter.set_table_properties({"delta.enableChangeDataFeed": "false"})  # v3: off
    deltalake.write_deltalake(str(root), data, mode="append")  # v4
    with pytest.raises(errors.InvalidTableError) as info:
        _changes(str(root), 0, 2)
    assert info.value.error_class == "DELTA_MISSING_CHANGE_DATA"
    assert "[0 , 2]" in str(info.value) and "version [0]" in str(info.value)
    assert _changes(str(root), 1, 2).num_rows == 2
    with pytest.raises(errors.InvalidTableError) as info:
        _changes(str(root), 1, 4)
    assert "version [3]" in str(info.value)


def test_remove_without_extended_metadata_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(TABLES / "delta-rs/cdf-table", root)
    commit = root / "_delta_log" / f"{1:020d}.json"
    lines = []
    for line in commit.read_text().splitlines():
        if line.startswith('{"cdc"'):
            continue  # without change files the removes must be read as deletes
        if line.startswith('{"remove"'):
            action = json.loads(line)
            action["remove"].pop("extendedFileMetadata")
            line = json.dumps(action)
        lines.append(line)
    mtime = commit.stat().st_mtime_ns
    commit.write_text("\n".join(lines) + "\n")
    os.utime(commit, ns=(mtime, mtime))
    with pytest.raises(errors.InvalidTableError) as info:
        _changes(str(root), 1, 1)
    assert info.value.error_class == "DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA"


def test_a_range_before_a_column_was_added_reads_the_latest_schema(tmp_path: Path) -> None:
    root = tmp_path / "t"
    first = pa.table({"id": pa.array([1, 2], pa.int64())})
    deltalake.write_deltalake(str(root), first, configuration=CDF_ON)
    later = pa.table({"id": pa.array([3], pa.int64()), "extra": pa.array(["x"])})
    deltalake.write_deltalake(str(root), later, mode="append", schema_mode="merge")
    commit_times_from_commit_info(root)
    ours = _changes(str(root), 0, 0)
    assert ours.column_names[:2] == ["id", "extra"]
    assert ours["extra"].null_count == 2
    assert normalize(ours) == normalize(oracle_changes(str(root), 0, 0))
    _assert_same(str(root), 0, 1)


def _history_with_vectors(root: str, config: dict[str, str]) -> None:
    import deltalog

    first = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "p": pa.array(["a", "b"] * 5),
            "s": pa.array([{"x": i, "y": str(i)} for i in range(10)]),
        }
    )
    config = {**CDF_ON, "delta.enableDeletionVectors": "true", **config}
    deltalog.write_table(root, first, partition_by=["p"], configuration=config)
    later = pa.table({"id": pa.array([20, 21], pa.int64()), "p": ["a", "c"], "extra": [1.5, None]})
    deltalog.write_table(root, later, mode="append", schema_mode="merge")
    deltalog.delete(root, "id IN (2, 3, 20)")  # deletion vectors: rows by their position
    deltalog.update(root, "id = 4", {"extra": 9.0})
    replacement = first.filter(pa.compute.equal(first["p"], "a")).slice(0, 2)
    deltalog.write_table(root, replacement, mode="overwrite", predicate="p = 'a'")
    commit_times_from_commit_info(Path(root))


def test_one_scan_reads_mapped_columns_vectors_and_nested_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read_plan reads whole local files in one pyarrow scan: physical (mapped) names, a struct
    # column, a partition column, a column added later (null in older files), files read twice
    # (added, then removed by an overwrite in the range) and deletion vectors selecting rows by
    # their position in the file, without falling back to reading file by file. deltalake reads
    # no change feed under column mapping: the same history without it is checked against
    # deltalake, and the mapped table must give the same rows.
    from deltalog.change_data_feed import rows

    plain, mapped = str(tmp_path / "plain"), str(tmp_path / "mapped")
    _history_with_vectors(plain, {})
    _history_with_vectors(mapped, {"delta.columnMapping.mode": "name"})
    calls: list[Any] = []
    by_file = rows.read_change_file
    monkeypatch.setattr(
        rows, "read_change_file", lambda *a, **k: calls.append(a) or by_file(*a, **k)
    )
    last = DeltaLog.for_table(plain).update().version
    for start, end in [(0, last - 1), (1, last - 1), (2, 3)]:
        _assert_same(plain, start, end)
    # The overwrite removes a file whose deletion vector holds ids 2 and 4: its live rows 0, 6
    # and 8 are deleted, and 4 from the UPDATE's file (deltalake 1.6.6 gives the vector's rows
    # 2 and 4 instead, so here the rows come from the inputs).
    overwrite = _changes(plain, last, last)
    kinds, ids = overwrite["_change_type"].to_pylist(), overwrite["id"].to_pylist()
    deletes = sorted(i for k, i in zip(kinds, ids, strict=True) if k == "delete")
    inserts = sorted(i for k, i in zip(kinds, ids, strict=True) if k == "insert")
    assert (deletes, inserts) == ([0, 4, 6, 8], [0, 2])
    for start, end in [(0, last), (1, last), (2, 3), (last, last)]:
        expected = normalize(_changes(plain, start, end).drop_columns(["_commit_timestamp"]))
        ours = _changes(mapped, start, end).drop_columns(["_commit_timestamp"])
        assert normalize(ours) == expected, (start, end)
    assert calls == []
