"""Row tracking through real commits (no Spark): ids assigned at commit, the high-water mark,
concurrent appends rebased to disjoint ranges, the refusals that keep ids from being lost, and
other readers (deltalake, DuckDB) still reading the tables. Expected ids are counted from the
rows written; ids are read back from the commit and parquet files (tests.conformance.row_ids)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors, write_table
from deltalog.actions import RemoveFile
from deltalog.write.file_writer import DataFileWriter, WriteLayout
from tests.conformance.row_ids import live_files, rows_with_ids
from tests.conformance.rows import duckdb_rows, oracle_rows

ENABLE = {"delta.enableRowTracking": "true"}


def _ids(lo: int, hi: int) -> pa.Table:
    return pa.table({"id": pa.array(range(lo, hi), pa.int64())})


def _commit_lines(root: Path, version: int) -> list[dict[str, object]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_create_and_appends_assign_contiguous_ids_and_commit_versions(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _ids(0, 5), configuration=ENABLE, max_records_per_file=2)
    write_table(str(root), _ids(5, 8), mode="append")
    lines = _commit_lines(root, 0)
    protocol = next(x["protocol"] for x in lines if "protocol" in x)
    assert {"rowTracking", "domainMetadata"} <= set(protocol["writerFeatures"])  # type: ignore[index]
    conf = next(x["metaData"] for x in lines if "metaData" in x)["configuration"]  # type: ignore[index]
    assert conf["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert conf["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith(
        "_row-commit-version-col-"
    )
    _, _, mark = live_files(root)
    assert mark == 7  # 8 rows: ids 0..7
    got = rows_with_ids(root, ["id"])
    # rows are written in order, so row i of the input has id i; the first 5 came in v0
    assert got["_row_id"].to_pylist() == list(range(8))
    assert got["id"].to_pylist() == list(range(8))
    assert got["_row_commit_version"].to_pylist() == [0] * 5 + [1] * 3
    # other readers still read the table
    assert sorted(oracle_rows(str(root))["id"].to_pylist()) == list(range(8))
    assert sorted(duckdb_rows(str(root))["id"].to_pylist()) == list(range(8))


def _append_txn(root: Path, rows: pa.Table):  # type: ignore[no-untyped-def]
    """A transaction that has written ``rows`` as a data file, not yet committed."""
    txn = DeltaLog.for_table(str(root)).start_transaction()
    assert txn.snapshot is not None
    adds = DataFileWriter(txn.log.store, WriteLayout.of(txn.snapshot)).write(rows)
    return txn, adds


def test_concurrent_appends_get_disjoint_ranges(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _ids(0, 4), configuration=ENABLE)  # ids 0-3
    slow, slow_adds = _append_txn(root, _ids(100, 103))
    fast, fast_adds = _append_txn(root, _ids(200, 205))
    assert fast.commit(fast_adds, "WRITE") == 1  # ids 4-8
    assert slow.commit(slow_adds, "WRITE") == 2  # retried above 8: ids 9-11
    (slow_add,) = [x["add"] for x in _commit_lines(root, 2) if "add" in x]
    assert slow_add["baseRowId"] == 9  # type: ignore[index]
    assert slow_add["defaultRowCommitVersion"] == 2  # type: ignore[index]
    _, _, mark = live_files(root)
    assert mark == 11
    got = rows_with_ids(root, ["id"])
    assert got["_row_id"].to_pylist() == list(range(12))  # disjoint and dense
    assert got["id"].to_pylist() == [0, 1, 2, 3, *range(200, 205), *range(100, 103)]


def test_enabling_on_files_without_ids_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _ids(0, 3))
    txn = DeltaLog.for_table(str(root)).start_transaction()
    assert txn.snapshot is not None
    conf = {**txn.snapshot.metadata.configuration, **ENABLE}
    txn.update_metadata(dataclasses.replace(txn.snapshot.metadata, configuration=conf))
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        txn.commit([], "SET TBLPROPERTIES")
    assert e.value.error_class == "DELTA_ROW_TRACKING_BACKFILL_REQUIRED"
    assert not (root / "_delta_log" / f"{1:020d}.json").exists()


def test_a_rewrite_that_does_not_keep_ids_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _ids(0, 3), configuration=ENABLE)
    txn, adds = _append_txn(root, _ids(0, 3))
    assert txn.snapshot is not None
    old = txn.snapshot.all_files_arrow().to_pylist()[0]["path"]
    actions = [RemoveFile(old, 1, False), *adds]
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        txn.commit(actions, "OPTIMIZE")
    assert e.value.error_class == "DELTA_ROW_TRACKING_NOT_PRESERVED"
    assert not (root / "_delta_log" / f"{1:020d}.json").exists()


def test_compaction_with_kept_ids_is_snapshot_isolated(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _ids(0, 3), configuration=ENABLE)
    txn = DeltaLog.for_table(str(root)).start_transaction()
    assert txn.snapshot is not None
    layout = WriteLayout.of(txn.snapshot, data_change=False)
    adds = DataFileWriter(txn.log.store, layout).write(_ids(0, 3))
    old = txn.snapshot.all_files_arrow().to_pylist()[0]["path"]
    tags = {"delta.rowTracking.preserved": "true"}
    txn.commit([RemoveFile(old, 1, False), *adds], "OPTIMIZE", tags=tags)
    lines = _commit_lines(root, 1)
    info = lines[0]["commitInfo"]
    assert info["isolationLevel"] == "SnapshotIsolation"  # type: ignore[index]
    assert info["tags"] == tags  # type: ignore[index]


def test_enabling_on_an_existing_table_backfills_ids_first(tmp_path: Path) -> None:
    from deltalog.commands.ddl.protocol_change import set_table_properties

    root = tmp_path / "t"
    write_table(str(root), _ids(0, 5), max_records_per_file=2)  # 3 files, no row tracking
    write_table(str(root), _ids(5, 7), mode="append")
    assert set_table_properties(str(root), ENABLE) == 4
    operations = [_commit_lines(root, v)[0]["commitInfo"]["operation"] for v in (2, 3, 4)]  # type: ignore[index]
    assert operations == ["SET TBLPROPERTIES", "ROW TRACKING BACKFILL", "SET TBLPROPERTIES"]
    backfill = _commit_lines(root, 3)
    assert backfill[0]["commitInfo"]["isolationLevel"] == "SnapshotIsolation"  # type: ignore[index]
    assert all(not x["add"]["dataChange"] for x in backfill if "add" in x)  # type: ignore[index]
    last = _commit_lines(root, 4)
    assert last[0]["commitInfo"]["tags"] == {"rowTrackingEnablementOnly": "true"}  # type: ignore[index]
    conf = next(x["metaData"] for x in last if "metaData" in x)["configuration"]  # type: ignore[index]
    assert conf["delta.enableRowTracking"] == "true"
    assert conf["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    got = rows_with_ids(root, ["id"])
    assert sorted(got["_row_id"].to_pylist()) == list(range(7))  # every row, once
    assert set(got["_row_commit_version"].to_pylist()) == {3}  # the backfill's version
    assert sorted(got["id"].to_pylist()) == list(range(7))
    assert sorted(oracle_rows(str(root))["id"].to_pylist()) == list(range(7))


def test_a_dml_racing_the_enablement_takes_the_backfilled_ids(tmp_path: Path) -> None:
    """A deletion-vector DELETE prepared before row tracking was enabled re-adds a file the
    backfill gave ids: the retry copies the backfill's ids onto its add and remove (reference
    ``resolveRowTrackingBackfillConflicts``) and says ids were not preserved."""
    from deltalog.commands.ddl.protocol_change import set_table_properties
    from deltalog.commands.dml.arrow import delete_rows
    from deltalog.commands.dml.job import DmlJob
    from deltalog.txn import operations

    root = tmp_path / "t"
    conf = {"delta.enableDeletionVectors": "true"}
    write_table(str(root), _ids(0, 6), configuration=conf, max_records_per_file=3)
    job = DmlJob.at(str(root), operations.delete(["id = 1"]))
    with job:
        actions, metrics = delete_rows(job, job.parse("id = 1"))
    set_table_properties(str(root), ENABLE)  # versions 1 (feature), 2 (backfill), 3 (property)
    assert job.commit(actions, metrics) == 4
    backfilled = {x["add"]["path"]: x["add"] for x in _commit_lines(root, 2) if "add" in x}  # type: ignore[index]
    mine = _commit_lines(root, 4)
    assert mine[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "false"}  # type: ignore[index]
    for kind in ("add", "remove"):
        (action,) = [x[kind] for x in mine if kind in x]
        ids = backfilled[action["path"]]  # type: ignore[index]
        assert action["baseRowId"] == ids["baseRowId"]  # type: ignore[index]
        assert action["defaultRowCommitVersion"] == ids["defaultRowCommitVersion"]  # type: ignore[index]
    got = rows_with_ids(root, ["id"])
    assert sorted(got["id"].to_pylist()) == [0, 2, 3, 4, 5]
    assert sorted(got["_row_id"].to_pylist()) == [0, 2, 3, 4, 5]  # the backfill's ids, row 1 gone


def test_dropping_the_feature_unbackfills_then_downgrades(tmp_path: Path) -> None:
    from deltalog.commands.ddl.drop_feature import drop_feature_support

    root = tmp_path / "t"
    write_table(str(root), _ids(0, 4), configuration=ENABLE, max_records_per_file=2)  # v0
    version = drop_feature_support(str(root), "rowTracking")
    names = [_commit_lines(root, v)[0]["commitInfo"]["operation"] for v in range(1, version + 1)]  # type: ignore[index]
    assert names == ["SET TBLPROPERTIES", "ROW TRACKING UNBACKFILL", "DROP FEATURE"]
    metadata, files, mark = live_files(root)
    assert mark == -1  # the domain is removed
    assert all("baseRowId" not in a and "defaultRowCommitVersion" not in a for a in files.values())
    assert not [k for k in metadata["configuration"] if "owTracking" in k]
    last = _commit_lines(root, version)
    protocol = next(x["protocol"] for x in last if "protocol" in x)  # type: ignore[index]
    assert "rowTracking" not in protocol["writerFeatures"]  # type: ignore[index]
    assert sorted(oracle_rows(str(root))["id"].to_pylist()) == list(range(4))
    write_table(str(root), _ids(4, 5), mode="append")  # writes as a plain table again
    assert all("baseRowId" not in a for a in live_files(root)[1].values())


def _suspended_unbackfill(root: Path):  # type: ignore[no-untyped-def]
    """A table of three files with ids, suspended, and its unbackfill prepared, not committed."""
    from deltalog.commands.ddl.protocol_change import set_table_properties
    from deltalog.commands.ddl.row_tracking_backfill import unbackfill_transaction

    write_table(str(root), _ids(0, 6), configuration=ENABLE, max_records_per_file=2)  # v0
    set_table_properties(
        str(root), {"delta.enableRowTracking": "false", "delta.rowTrackingSuspended": "true"}
    )  # v1
    prepared = unbackfill_transaction(DeltaLog.for_table(str(root)))
    assert prepared is not None
    return prepared


def test_an_unbackfill_loses_to_a_concurrent_backfill(tmp_path: Path) -> None:
    """Reference ``resolveRowTrackingUnBackfillConflicts``: enabling and disabling row
    tracking at once aborts the disablement."""
    from deltalog.txn import operations

    root = tmp_path / "t"
    txn, adds, operation = _suspended_unbackfill(root)
    winner = DeltaLog.for_table(str(root)).start_transaction()
    winner.commit([], operations.Operation("ROW TRACKING BACKFILL", {"batchId": 0}))  # v2
    with pytest.raises(errors.DeltaConcurrentModificationException) as e:
        txn.commit(adds, operation)
    assert e.value.error_class == "DELTA_ROW_TRACKING_BACKFILL_RUNNING_CONCURRENTLY_WITH_UNBACKFILL"
    assert DeltaLog.for_table(str(root)).update().version == 2


def test_an_unbackfill_leaves_out_files_a_concurrent_delete_removed(tmp_path: Path) -> None:
    """The winner removed one of the files the unbackfill re-adds: the retry leaves it out
    (nothing resurrected, no conflict), and the winner's rewrite of it came without ids."""
    from deltalog import delete

    root = tmp_path / "t"
    txn, adds, operation = _suspended_unbackfill(root)
    delete(str(root), "id = 0")  # v2: rewrites the file of ids 0-1 (suspended: no new ids)
    version = txn.commit(adds, operation)
    assert version == 3
    _, files, _ = live_files(root)
    assert len(files) == 3
    assert all("baseRowId" not in a and "defaultRowCommitVersion" not in a for a in files.values())
    assert sorted(oracle_rows(str(root))["id"].to_pylist()) == [1, 2, 3, 4, 5]
    readded = [x["add"]["path"] for x in _commit_lines(root, 3) if "add" in x]  # type: ignore[index]
    assert len(readded) == 2  # the two files the delete left alone
