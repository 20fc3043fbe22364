"""Version checksum files (``<version>.crc``): written after each commit, derived incrementally,
read and validated with snapshots, tolerated when absent or corrupt.

Expected values never come from deltalog: file counts and sizes come from deltalake's add
actions and from the data files on disk, protocol and metadata from the commit JSON, and the
checksums delta-spark wrote into the shared tables are compared with deltalake's state."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors, write_table
from deltalog.actions import (
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltalog.log import checksum as ck
from deltalog.log.checksum import VersionChecksum, derive_checksum, parse_checksum
from deltalog.txn import hooks
from tests.conformance.oracle import TABLES
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_logs() -> Any:
    DeltaLog.clear_cache()
    yield
    DeltaLog.clear_cache()


def rows(ids: list[int], part: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([part] * len(ids))})


def crc(root: Path, version: int) -> dict[str, Any]:
    return json.loads((root / "_delta_log" / f"{version:020d}.crc").read_text())


def commit_actions(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def latest_action(root: Path, version: int, key: str) -> dict[str, Any]:
    """The newest ``key`` action (``metaData``, ``protocol``) in commits ``0..version``."""
    for v in range(version, -1, -1):
        for action in commit_actions(root, v):
            if key in action:
                return action[key]  # type: ignore[no-any-return]
    raise AssertionError(f"no {key} up to version {version}")


def expected_files(root: Path, version: int) -> tuple[int, int]:
    """(numFiles, tableSizeBytes) by deltalake, checked against the sizes of the files on disk."""
    adds = pa.table(deltalake.DeltaTable(str(root), version=version).get_add_actions(flatten=True))
    paths, sizes = adds["path"].to_pylist(), adds["size_bytes"].to_pylist()
    assert sizes == [os.path.getsize(root / p) for p in paths]
    return len(paths), sum(sizes)


def assert_crc_matches_table(root: Path, version: int) -> dict[str, Any]:
    got = crc(root, version)
    assert (got["numFiles"], got["tableSizeBytes"]) == expected_files(root, version)
    assert got["numMetadata"] == got["numProtocol"] == 1
    assert got["metadata"] == latest_action(root, version, "metaData")
    assert got["protocol"] == latest_action(root, version, "protocol")
    info = commit_actions(root, version)[0]["commitInfo"]
    assert got["txnId"] == info["txnId"]
    histogram = got["fileSizeHistogram"]
    assert sum(histogram["fileCounts"]) == got["numFiles"]
    assert sum(histogram["totalBytes"]) == got["tableSizeBytes"]
    return got


# -- written after commits --------------------------------------------------------------------


def versions_from_state(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The versions whose checksum the commit hook computes from the snapshot's state (not
    derived from the previous checksum), recorded as they happen."""
    seen: list[int] = []
    real = hooks.checksum_from_state

    def spy(snapshot: Any, **kw: Any) -> Any:
        seen.append(snapshot.version)
        return real(snapshot, **kw)

    monkeypatch.setattr(hooks, "checksum_from_state", spy)
    return seen


def test_create_append_and_overwrite_write_matching_checksums(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1, 2]), partition_by="part")
    write_table(str(root), rows([3], "b"), mode="append")
    write_table(str(root), rows([4, 5], "c"), mode="append")
    write_table(str(root), rows([9]), mode="overwrite", predicate="part = 'a'")  # removes
    write_table(str(root), rows([10]), mode="overwrite")  # removes everything
    for v in range(5):
        assert_crc_matches_table(root, v)
    assert crc(root, 0)["setTransactions"] == [] and crc(root, 0)["domainMetadata"] == []
    assert crc(root, 4)["numFiles"] == 1


def test_chain_is_derived_incrementally_across_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([0]))
    from_state = versions_from_state(monkeypatch)
    for i in range(1, 13):
        if i % 4 == 0:
            write_table(str(root), rows([i]), mode="overwrite", predicate=f"id >= {i - 1}")
        else:
            write_table(str(root), rows([i], f"p{i % 3}"), mode="append")
    assert from_state == []  # every checksum came from the previous one plus the commit
    assert (root / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    for v in range(13):
        assert_crc_matches_table(root, v)
    # Read back: a fresh log validates the latest checksum and keeps it.
    DeltaLog.clear_cache()
    snapshot = DeltaLog.for_table(str(root)).update()
    assert (
        snapshot.checksum is not None and snapshot.checksum.num_files == crc(root, 12)["numFiles"]
    )


def test_set_transactions_domain_metadata_and_in_commit_timestamps(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1]), configuration={"delta.enableInCommitTimestamps": "true"})
    write_table(str(root), rows([2]), mode="append", txn_app_id="app", txn_version=3)
    log = DeltaLog.for_table(str(root))
    txn = log.start_transaction()
    txn.commit([DomainMetadata("my.domain", '{"x":1}')], "WRITE", {"mode": "Append"})
    for v in range(3):
        got = assert_crc_matches_table(root, v)
        assert (
            got["inCommitTimestampOpt"]
            == commit_actions(root, v)[0]["commitInfo"]["inCommitTimestamp"]
        )
    got = crc(root, 2)
    assert [(t["appId"], t["version"]) for t in got["setTransactions"]] == [("app", 3)]
    assert got["domainMetadata"] == [
        {"domain": "my.domain", "configuration": '{"x":1}', "removed": False}
    ]


def test_concurrent_retry_derives_from_the_winners_checksum(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1]))
    slow = DeltaLog.for_table(str(root)).start_transaction()  # reads version 0
    write_table(str(root), rows([2]), mode="append")  # version 1 wins
    add = AddFile("extra.parquet", {}, 123, 1, True)
    (root / "extra.parquet").write_bytes(b"x" * 123)  # the size deltalake reports is the log's
    assert slow.commit([add], "WRITE", {"mode": "Append"}) == 2
    assert_crc_matches_table(root, 2)


# -- absent, corrupt, failing ----------------------------------------------------------------


def test_missing_previous_checksum_falls_back_to_the_state(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1]))
    write_table(str(root), rows([2]), mode="append")
    (root / "_delta_log" / f"{1:020d}.crc").unlink()
    DeltaLog.clear_cache()
    assert DeltaLog.for_table(str(root)).update().checksum is None
    write_table(str(root), rows([3]), mode="append")
    assert_crc_matches_table(root, 2)
    assert oracle_rows(str(root)).num_rows == 3


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b'{"numFiles": 1}', b"\xff\xfe"])
def test_corrupt_checksum_is_ignored(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1, 2]))
    (root / "_delta_log" / f"{0:020d}.crc").write_bytes(content)
    DeltaLog.clear_cache()
    with caplog.at_level(logging.WARNING):
        snapshot = DeltaLog.for_table(str(root)).update()
    assert snapshot.checksum is None and snapshot.version == 0
    assert ("not a valid checksum file" in caplog.text) == bool(content)
    write_table(str(root), rows([3]), mode="append")
    assert_crc_matches_table(root, 1)


def test_mismatching_checksum_is_logged_on_load_and_refuses_a_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1]))
    path = root / "_delta_log" / f"{0:020d}.crc"
    bad = json.loads(path.read_text())
    bad["numFiles"] += 1
    path.write_text(json.dumps(bad))
    DeltaLog.clear_cache()
    log = DeltaLog.for_table(str(root))
    with caplog.at_level(logging.WARNING):
        snapshot = log.update()
    assert "DELTA_TXN_LOG_FAILED_INTEGRITY" in caplog.text and "numFiles" in caplog.text
    assert snapshot.checksum is None  # forgotten: never the base of a derived checksum

    wrong = parse_checksum(json.dumps(bad).encode())
    assert wrong is not None
    snapshot.attach_checksum(wrong)
    with pytest.raises(errors.InvalidTableError) as e:
        log.checkpoint(snapshot)
    assert e.value.error_class == "DELTA_TXN_LOG_FAILED_INTEGRITY"
    assert str(root) in str(e.value) and "version 0" in str(e.value) and "Help:" in str(e.value)
    assert not list((root / "_delta_log").glob("*.checkpoint.parquet"))


def test_a_failing_checksum_write_never_fails_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1]))
    log = DeltaLog.for_table(str(root))

    def broken(path: str, data: bytes, **kw: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(log.store, "overwrite", broken)
    with caplog.at_level(logging.WARNING):
        version = log.start_transaction().commit(
            [AddFile("f.parquet", {}, 1, 1, True)], "WRITE", {"mode": "Append"}
        )
    assert version == 1 and (root / "_delta_log" / f"{1:020d}.json").exists()
    assert not (root / "_delta_log" / f"{1:020d}.crc").exists()
    assert "disk full" in caplog.text


# -- other readers ---------------------------------------------------------------------------


def test_deltalake_and_duckdb_read_tables_with_our_checksums(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), rows([1, 2]), partition_by="part")
    write_table(str(root), rows([3], "b"), mode="append")
    write_table(str(root), rows([4]), mode="overwrite", predicate="part = 'a'")
    assert len(list((root / "_delta_log").glob("*.crc"))) == 3
    expected = canonical(pa.table({"id": pa.array([3, 4], pa.int64()), "part": ["b", "a"]}))
    assert canonical(oracle_rows(str(root))) == expected
    assert canonical(duckdb_rows(str(root))) == expected


@pytest.mark.parametrize(
    "table",
    ["cdf-table-with-cdc-and-dvs", "table_with_deletion_logs", "checkpoint-v2-table"],
)
def test_checksums_written_by_delta_spark_validate(tmp_path: Path, table: str) -> None:
    root = tmp_path / table
    shutil.copytree(TABLES / "delta-rs" / table, root)
    log = DeltaLog.for_table(str(root))
    versions = sorted(int(p.name[:20]) for p in (root / "_delta_log").glob("*.crc"))
    assert versions
    for v in versions:
        raw = crc(root, v)
        snapshot = log.get_snapshot_at(v)
        assert snapshot.checksum is not None, f"version {v}: not parsed or not validated"
        assert snapshot.checksum.num_files == raw["numFiles"]
        assert (raw["numFiles"], raw["tableSizeBytes"]) == expected_files(root, v)
        histogram = raw.get("histogramOpt") or raw.get("fileSizeHistogram")
        if histogram:
            assert tuple(histogram["sortedBinBoundaries"]) == ck.DEFAULT_BIN_BOUNDARIES
            assert snapshot.checksum.file_size_histogram is not None
        if "numDeletionVectorsOpt" in raw:
            assert snapshot.checksum.num_deletion_vectors == raw["numDeletionVectorsOpt"]


# -- the pure functions ----------------------------------------------------------------------

MD = Metadata("id-1", '{"type":"struct","fields":[]}')
PROTO = Protocol(1, 2)


def base(**kw: Any) -> VersionChecksum:
    fields: dict[str, Any] = {
        "table_size_bytes": 100,
        "num_files": 2,
        "metadata": MD,
        "protocol": PROTO,
        "set_transactions": (),
        "domain_metadata": (),
    }
    return VersionChecksum(**(fields | kw))


def test_derive_counts_adds_and_removes_and_carries_the_histogram() -> None:
    start = base(file_size_histogram=ck.FileSizeHistogram.of(pa.array([40, 60]).to_numpy()))
    actions = [
        CommitInfo(operation="WRITE"),
        AddFile("c", {}, 10_000, 1, True),
        RemoveFile("a", size=40),
        SetTransaction("app", 1),
        DomainMetadata("d", "{}"),
    ]
    got = derive_checksum(start, actions, operation="WRITE", txn_id="t")
    assert got is not None
    assert (got.num_files, got.table_size_bytes, got.txn_id) == (2, 10_060, "t")
    assert got.set_transactions == (SetTransaction("app", 1),)
    assert got.domain_metadata == (DomainMetadata("d", "{}"),)
    assert got.file_size_histogram is not None
    assert sum(got.file_size_histogram.file_counts) == 2
    assert sum(got.file_size_histogram.total_bytes) == 10_060
    removed = derive_checksum(
        got, [DomainMetadata("d", "", removed=True)], operation="X", txn_id=None
    )
    assert removed is not None and removed.domain_metadata == ()


@pytest.mark.parametrize(
    ("start", "actions", "operation"),
    [
        (base(), [RemoveFile("a")], "DELETE"),  # no size: cannot subtract
        (base(), [AddFile("a", {}, 1, 1, False)], "COMPUTE STATS"),  # re-adds live files
        (base(), [RemoveFile("a", size=500)], "DELETE"),  # below zero: the base was wrong
        (base(metadata=None), [], "WRITE"),  # an old checksum without metadata
    ],
)
def test_derive_refuses_what_it_cannot_count(
    start: VersionChecksum, actions: list[Any], operation: str
) -> None:
    assert derive_checksum(start, actions, operation=operation, txn_id=None) is None


def test_set_transactions_are_left_out_past_the_limit_or_with_retention() -> None:
    many = [SetTransaction(f"a{i}", 1) for i in range(ck.MAX_SET_TRANSACTIONS + 1)]
    got = derive_checksum(base(), many, operation="WRITE", txn_id=None)
    assert got is not None and got.set_transactions is None
    retained = Metadata("id-1", configuration={ck.SET_TRANSACTION_RETENTION: "interval 1 day"})
    got = derive_checksum(base(), [retained], operation="WRITE", txn_id=None)
    assert got is not None and got.set_transactions is None


def test_json_round_trip_and_legacy_histogram_name() -> None:
    c = base(txn_id="x", in_commit_timestamp=5, num_deletion_vectors=1, num_deleted_records=4)
    assert parse_checksum(c.to_json()) == c
    obj = json.loads(c.to_json())
    assert list(obj)[:3] == ["txnId", "tableSizeBytes", "numFiles"]
    hist = ck.FileSizeHistogram.of(pa.array([1, 9000]).to_numpy())
    obj["histogramOpt"] = hist.to_dict()
    parsed = parse_checksum(json.dumps(obj).encode())
    assert parsed is not None and parsed.file_size_histogram == hist
    assert hist.file_counts[:3] == (1, 1, 0)


@pytest.mark.parametrize(
    "bad",
    [
        b'{"tableSizeBytes": "1", "numFiles": 1}',
        b'{"tableSizeBytes": true, "numFiles": 1}',
        b'{"tableSizeBytes": 1, "numFiles": 1, "protocol": {"minReaderVersion": "x"}}',
        b"null",
    ],
)
def test_parse_rejects_malformed_fields(bad: bytes) -> None:
    got = parse_checksum(bad)
    assert got is None or got.protocol is None
