"""The version checksum hook (``<version>.crc`` after each commit) across deletion vectors,
protocol changes and checkpoints; its setting; stale files; and delta-spark's own checksums
re-derived commit by commit.

Expected values come from the inputs (rows deleted, partitions touched), from deltalake's view of
the table, from the files on disk, and from the checksums delta-spark wrote into the shared
tables, never from deltalog."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors, write_table
from deltalog.actions import AddFile, RemoveFile, action_from_dict
from deltalog.commands.ddl.drop_feature import drop_feature_support
from deltalog.commands.ddl.protocol_change import set_table_properties
from deltalog.log.checksum import derive_checksum, dv_stats, parse_checksum
from tests.conformance.oracle import TABLES
from tests.conformance.rows import oracle_rows
from tests.unit.log.test_checksum import (
    assert_crc_matches_table,
    base,
    crc,
    versions_from_state,
)


@pytest.fixture(autouse=True)
def _fresh_logs() -> Any:
    DeltaLog.clear_cache()
    yield
    DeltaLog.clear_cache()


def ten_rows() -> pa.Table:
    ids = pa.array(range(10), pa.int64())
    return pa.table({"id": ids, "part": ["a"] * 5 + ["b"] * 5})


def crc_path(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.crc"


# -- deletion vectors, protocol changes, checkpoints ----------------------------------------


def test_deletion_vectors_and_dropping_them_keep_every_checksum_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    write_table(
        str(root),
        ten_rows(),
        partition_by="part",
        configuration={"delta.enableDeletionVectors": "true"},
    )
    from_state = versions_from_state(monkeypatch)
    deltalog.delete(str(root), "id = 1")  # v1: a DV on part a (1 row)
    deltalog.delete(str(root), "id = 2")  # v2: part a's DV replaced (2 rows)
    deltalog.delete(str(root), "id >= 7")  # v3: a DV on part b (3 rows)
    assert from_state == []  # all derived from the previous checksum
    got = assert_crc_matches_table(root, 3)
    # 10 rows written, deltalake reads what is left: the rest are deleted through DVs.
    assert got["numDeletedRecordsOpt"] == 10 - oracle_rows(str(root)).num_rows == 5
    assert got["numDeletionVectorsOpt"] == 2  # two partitions touched, one file each
    # PROTOCOL.md's deleted-record-count bins: [0], [1, 10), ...: both DVs (2 and 3 rows) in bin 1.
    assert got["deletedRecordCountsHistogramOpt"]["deletedRecordCounts"] == [0, 2] + [0] * 8
    assert crc(root, 1)["numDeletedRecordsOpt"] == 1 and crc(root, 2)["numDeletionVectorsOpt"] == 1

    # DROP FEATURE deletionVectors: unset the property, purge the DVs (REORG), three empty
    # commits with checkpoints, then the protocol change (re-adding files: from the state).
    dropped = drop_feature_support(str(root), "deletionVectors")
    assert from_state == [dropped]
    for v in range(4, dropped + 1):
        assert_crc_matches_table(root, v)
    after = crc(root, dropped)
    assert "deletionVectors" not in after["protocol"].get("readerFeatures", [])
    assert "numDeletionVectorsOpt" not in after  # no DVs readable: the metrics go
    assert crc(root, 3 + 1)["numDeletionVectorsOpt"] == 2  # unset property: still readable
    assert "numDeletionVectorsOpt" in crc(root, 5) and crc(root, 5)["numDeletionVectorsOpt"] == 0
    # The checkpoints written on the way were checked against these checksums first.
    assert (root / "_delta_log" / f"{dropped:020d}.checkpoint.parquet").exists()
    assert oracle_rows(str(root)).num_rows == 5


def test_dv_metrics_start_when_deletion_vectors_become_writable(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), ten_rows())
    assert "numDeletionVectorsOpt" not in crc(root, 0)
    set_table_properties(str(root), {"delta.enableDeletionVectors": "true"})
    # As delta-spark's SET TBLPROPERTIES wrote in the shared table_with_deletion_logs (v2): the
    # previous checksum had no DV metrics, the previous state gives them.
    got = assert_crc_matches_table(root, 1)
    assert (got["numDeletedRecordsOpt"], got["numDeletionVectorsOpt"]) == (0, 0)
    assert got["deletedRecordCountsHistogramOpt"]["deletedRecordCounts"] == [1] + [0] * 9
    deltalog.delete(str(root), "id < 3")
    assert crc(root, 2)["numDeletedRecordsOpt"] == 3


def test_dv_metrics_absent_while_deletion_vectors_are_supported_but_off(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), ten_rows(), configuration={"delta.feature.deletionVectors": "supported"})
    write_table(str(root), ten_rows(), mode="append")
    # The reference counts DVs from the first version only where they can be written.
    for v in (0, 1):
        got = assert_crc_matches_table(root, v)
        assert "deletionVectors" in got["protocol"]["readerFeatures"]
        assert "numDeletionVectorsOpt" not in got


def test_tombstones_name_no_data_file() -> None:
    removes = [RemoveFile("deletion_vector_x.bin", size=40, data_change=False)]
    got = derive_checksum(base(), removes, operation="Deletion Vector Tombstones", txn_id="t")
    assert got is not None and (got.num_files, got.table_size_bytes) == (2, 100)
    counted = derive_checksum(base(), removes, operation="DELETE", txn_id="t")
    assert counted is not None and (counted.num_files, counted.table_size_bytes) == (1, 60)
    readd = [AddFile("a", {}, 40, 1, False)]
    assert derive_checksum(base(), readd, operation="Manual Update", txn_id=None) is None


# -- the setting, stale and failing files --------------------------------------------------


def test_setting_off_writes_no_checksum_and_checkpoints_without_checking(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), ten_rows())
    log = DeltaLog.for_table(str(root))
    log.write_checksum = False
    for _ in range(2):
        write_table(str(root), ten_rows(), mode="append")
    assert crc_path(root, 0).exists()
    assert not crc_path(root, 1).exists() and not crc_path(root, 2).exists()

    # A wrong checksum refuses a checkpoint only while the setting is on, as in the reference.
    bad = json.loads(crc_path(root, 0).read_text())
    bad["numFiles"] = 7
    wrong = parse_checksum(json.dumps(bad).encode())
    snapshot = log.get_snapshot_at(0)
    snapshot.attach_checksum(wrong)
    log.checkpoint(snapshot)
    assert (root / "_delta_log" / f"{0:020d}.checkpoint.parquet").exists()
    log.write_checksum = True
    snapshot = log.update()
    snapshot.attach_checksum(wrong)
    with pytest.raises(errors.InvalidTableError, match="DELTA_TXN_LOG_FAILED_INTEGRITY"):
        log.checkpoint(snapshot)

    # Back on: the previous version has no checksum, so this one comes from the state.
    write_table(str(root), ten_rows(), mode="append")
    assert_crc_matches_table(root, 3)


def test_a_stale_checksum_at_the_committed_version_is_replaced(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), ten_rows())
    # Left by an earlier table at this path, or a writer that died while writing it.
    crc_path(root, 1).write_text('{"tableSizeBytes": 1, "numFiles": 99')
    write_table(str(root), ten_rows(), mode="append")
    assert_crc_matches_table(root, 1)
    assert not [p for p in (root / "_delta_log").iterdir() if p.name.endswith(".tmp")]


# -- delta-spark's checksums, commit by commit ------------------------------------------------


def golden_checksum_tables() -> list[Path]:
    return sorted({p.parent.parent for p in TABLES.glob("*/*/_delta_log/[0-9]*.crc")})


def versions_with_checksums(root: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (root / "_delta_log").glob("[0-9]*.crc"))


# shared delta-rs table cdc_ict_table: commit 1's inCommitTimestamp was edited after
# delta-spark wrote it (commitInfo.timestamp and the .crc still say 1783874206883).
EDITED = {("cdc_ict_table", 1): "in_commit_timestamp"}


@pytest.mark.parametrize("root", golden_checksum_tables(), ids=lambda p: p.name)
def test_delta_spark_checksums_are_rederived_from_each_commit(root: Path) -> None:
    """Each of delta-spark's ``<v>.crc`` equals deltalog's derivation from ``<v-1>.crc`` and
    commit ``v`` (every field: counts, sizes, histogram, DV metrics, transactions, domains,
    protocol, metadata), and validates against the replayed state."""
    log = DeltaLog.for_table(str(root))
    versions = versions_with_checksums(root)
    assert versions
    pairs = 0
    for v in versions:
        ref = parse_checksum(crc_path(root, v).read_bytes())
        assert ref is not None
        snapshot = log.get_snapshot_at(v)
        assert snapshot.checksum == ref, f"version {v}: not parsed or disagrees with the state"
        adds = deltalake.DeltaTable(str(root), version=v).get_add_actions(flatten=True)
        assert (ref.num_files, ref.table_size_bytes) == (
            len(adds),
            sum(pa.table(adds)["size_bytes"].to_pylist()),
        )
        if v - 1 not in versions:
            continue
        lines = [json.loads(x) for x in (root / "_delta_log" / f"{v:020d}.json").open() if x]
        actions = [a for d in lines for k, val in d.items() if (a := action_from_dict(k, val))]
        operation = next(d["commitInfo"]["operation"] for d in lines if "commitInfo" in d)
        previous = parse_checksum(crc_path(root, v - 1).read_bytes())
        assert previous is not None
        read = log.get_snapshot_at(v - 1)
        derived = derive_checksum(
            previous,
            actions,
            operation=operation,
            txn_id=ref.txn_id,
            previous_dv_stats=lambda read=read: dv_stats(read),  # type: ignore[misc]
        )
        assert derived is not None, f"version {v} ({operation})"
        skip = EDITED.get((root.name, v))
        for f in fields(ref):
            if f.name != skip:
                assert getattr(derived, f.name) == getattr(ref, f.name), (v, operation, f.name)
        pairs += 1
    assert pairs == len(versions) - 1 or len(versions) == 1


def test_a_tampered_delta_spark_checksum_is_dropped_on_load(tmp_path: Path) -> None:
    root = tmp_path / "t"
    src = TABLES / "delta-rs" / "table_with_deletion_logs"
    os.makedirs(root)
    for p in src.rglob("*"):
        if p.is_file():
            (root / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (root / p.relative_to(src)).write_bytes(p.read_bytes())
    latest = versions_with_checksums(root)[-1]
    raw = json.loads(crc_path(root, latest).read_text())
    raw["numDeletedRecordsOpt"] += 1
    crc_path(root, latest).write_text(json.dumps(raw))
    snapshot = DeltaLog.for_table(str(root)).update()
    assert snapshot.version == latest and snapshot.checksum is None
