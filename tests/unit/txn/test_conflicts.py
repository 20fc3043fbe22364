"""The conflict checker (reference ``ConflictChecker``) on real snapshots: tables written by
``deltalake``, snapshots loaded by deltalog, winning commits read back from the commit files
``deltalake`` wrote after the snapshot (or built from actions where ``deltalake`` cannot make
them). Every rule has a case where it fires and one where it must not, and the order of the
rules is pinned where one winner breaks several."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, TableFeatures, Transaction

from deltalog import DeltaLog
from deltalog.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
)
from deltalog.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    DeltaConcurrentModificationException,
    InvalidTableError,
    MetadataChangedException,
    ProtocolChangedException,
    UnsupportedFeatureError,
)
from deltalog.log.snapshot import Snapshot
from deltalog.scan.predicate import Predicate, parse_predicate
from deltalog.txn.conflicts import check_conflicts, in_commit_timestamp_after
from deltalog.txn.read_set import (
    SERIALIZABLE,
    SNAPSHOT_ISOLATION,
    WRITE_SERIALIZABLE,
    PendingCommit,
    ReadSet,
)
from deltalog.txn.winning_commit import WinningCommit

# -- helpers --------------------------------------------------------------------------------------

_LEGACY = ("appendOnly", "invariants")  # the writer features protocol (1, 2) implies


def _rows(p: list[int] | None, x: list[int]) -> pa.Table:
    columns: dict[str, pa.Array] = {"x": pa.array(x, pa.int64())}
    if p is not None:
        columns = {"p": pa.array(p, pa.int32()), **columns}
    return pa.table(columns)


def _snapshot(root: Path) -> Snapshot:
    DeltaLog.clear_cache()
    return DeltaLog.for_table(str(root)).update()


def _winner(root: Path, version: int) -> WinningCommit:
    """The commit ``deltalake`` wrote at ``version``, as the committer reads it."""
    path = root / "_delta_log" / f"{version:020d}.json"
    mtime = int(os.stat(path).st_mtime * 1000)
    return WinningCommit.parse(version, path.read_bytes(), mtime, str(root))


def _built(
    version: int, *actions: Action, operation: str = "WRITE", **info: object
) -> WinningCommit:
    ci = CommitInfo(timestamp=1_000, operation=operation, **info)  # type: ignore[arg-type]
    return WinningCommit(version, (ci, *actions), modification_time=2_000, table="/t")


def _pending(
    snapshot: Snapshot | None,
    actions: Iterable[Action] = (),
    *,
    where: Iterable[str | None] = (),
    files: Iterable[str] = (),
    whole_table: bool = False,
    app_ids: Iterable[str] = (),
    level: str = SERIALIZABLE,
) -> PendingCommit:
    predicates: list[Predicate | None] = [None if w is None else parse_predicate(w) for w in where]
    reads = ReadSet(predicates, [], whole_table, set(app_ids))
    reads.add_files(pa.array(list(files), pa.string()))
    return PendingCommit(snapshot, reads, level, tuple(actions))


def _add(path: str, p: int | None = 1, stats: str | None = None) -> AddFile:
    values: dict[str, str | None] = {} if p is None else {"p": str(p)}
    return AddFile(path, values, 100, 1, True, stats=stats)


def _remove(path: str, p: int | None = 1) -> RemoveFile:
    values: dict[str, str | None] | None = None if p is None else {"p": str(p)}
    return RemoveFile(path, 5, True, True, values, 100)


def _file_in(snapshot: Snapshot, p: int) -> str:
    """The path of the (single) live file of partition ``p``."""
    files = snapshot.all_files_arrow()
    for path, values in zip(
        files["path"].to_pylist(), files["partitionValues"].to_pylist(), strict=True
    ):
        if dict(values)["p"] == str(p):
            return str(path)
    raise AssertionError(f"no file in p={p}")


def _check_raises(
    pending: PendingCommit,
    winner: WinningCommit,
    kind: type[DeltaConcurrentModificationException],
    error_class: str,
    *fragments: str,
) -> DeltaConcurrentModificationException:
    with pytest.raises(DeltaConcurrentModificationException) as info:
        check_conflicts(pending, winner)
    err = info.value
    assert type(err) is kind, f"{type(err).__name__}: {err}"
    assert err.error_class == error_class
    assert err.version == winner.version
    text = str(err)
    assert f"version {winner.version}" in text
    assert winner.operation in text
    assert "delta.`" in text or "Table " in text  # the table is named
    assert "concurrency-control" in text  # and what to do
    for fragment in fragments:
        assert fragment in text, text
    return err


@pytest.fixture
def part(tmp_path: Path) -> Path:
    """Partitioned by ``p``: one file in p=1 (x=10), one in p=2 (x=20); protocol (1, 2)."""
    root = tmp_path / "part"
    deltalake.write_deltalake(str(root), _rows([1, 2], [10, 20]), partition_by=["p"])
    return root


@pytest.fixture
def flat(tmp_path: Path) -> Path:
    """Unpartitioned: one file (x=10, 20)."""
    root = tmp_path / "flat"
    deltalake.write_deltalake(str(root), _rows(None, [10, 20]))
    return root


# -- WinningCommit --------------------------------------------------------------------------------


def test_parse_real_commit(part: Path) -> None:
    deltalake.write_deltalake(
        str(part),
        _rows([1, 2], [1, 2]),
        mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction("q1", 7)]),
    )
    w = _winner(part, 1)
    assert w.version == 1
    assert w.operation == "WRITE"
    assert w.commit_info is not None and w.commit_info.read_version is None
    assert len(w.adds) == 2 and not w.removes
    assert w.app_ids == {"q1"} and w.set_transactions[0].version == 7
    assert w.metadata is None and w.protocol is None and not w.domain_metadata
    assert not w.is_blind_append  # deltalake writes no isBlindAppend: may have changed data
    assert w.in_commit_timestamp is None and w.timestamp == w.modification_time > 0
    assert w.table == str(part)


def test_parse_corrupt_commit() -> None:
    data = b'{"commitInfo":{"operation":"WRITE"}}\n{"add":{"path":"a.parquet","partitionVal'
    with pytest.raises(InvalidTableError) as info:
        WinningCommit.parse(4, data, 0, "/t")
    assert info.value.error_class == "DELTA_CORRUPT_COMMIT"
    assert "/t/_delta_log/00000000000000000004.json line 2" in str(info.value)


def test_built_commit_properties() -> None:
    w = _built(
        3,
        DomainMetadata("d", "{}"),
        is_blind_append=True,
        in_commit_timestamp=5_000,
        extra={"tags": {"delta.identity.schemaUpdate": "true"}},
    )
    assert w.is_blind_append and w.identity_only_metadata_update
    assert w.timestamp == 5_000 and [d.domain for d in w.domain_metadata] == ["d"]
    assert json.loads(w.commit_info_json or "")["isBlindAppend"] is True
    assert WinningCommit(3, (), 10).operation == "TRANSACTION"


def test_in_commit_timestamp_after() -> None:
    assert in_commit_timestamp_after(100, _built(1, in_commit_timestamp=500)) == 501
    assert in_commit_timestamp_after(100, _built(1)) == 2_001  # no ICT: the file's time
    assert in_commit_timestamp_after(9_000, _built(1, in_commit_timestamp=500)) == 9_000


def test_nothing_to_check_returns_the_same_pending(part: Path) -> None:
    snap = _snapshot(part)
    pending = _pending(snap, [_add("new.parquet")])
    assert check_conflicts(pending, _built(1, _add("other.parquet"))) is pending


# -- 1. protocol ----------------------------------------------------------------------------------


def test_protocol_changed_by_both(part: Path) -> None:
    snap = _snapshot(part)
    DeltaTable(str(part)).alter.add_feature(
        TableFeatures.AppendOnly, allow_protocol_versions_increase=True
    )
    winner = _winner(part, 1)
    assert winner.protocol is not None
    _check_raises(
        _pending(snap, [Protocol(1, 3)]),
        winner,
        ProtocolChangedException,
        "DELTA_PROTOCOL_CHANGED",
        "ADD FEATURE",
        "changes it too",
        "Conflicting commit:",
    )


def test_protocol_winner_dropping_features(part: Path) -> None:
    snap = _snapshot(part)  # (1, 2): appendOnly and invariants implied
    DeltaTable(str(part)).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    winner = _winner(part, 1)  # (3, 7, deletionVectors) lists neither
    _check_raises(
        _pending(snap, [_add("a.parquet")]),
        winner,
        ProtocolChangedException,
        "DELTA_PROTOCOL_CHANGED",
        "appendOnly, invariants",
    )


def test_protocol_upgrade_keeping_features_passes(part: Path) -> None:
    snap = _snapshot(part)
    # (1, 2) implies appendOnly and invariants; listing them keeps them (a features protocol).
    winner = _built(1, Protocol(1, 7, None, _LEGACY), operation="UPGRADE PROTOCOL")
    pending = _pending(snap, [_add("a.parquet")], where=["p = 1"])
    assert check_conflicts(pending, winner).actions is pending.actions


def test_protocol_deltalog_cannot_read(part: Path) -> None:
    snap = _snapshot(part)
    winner = _built(1, Protocol(3, 7, ("futureFeature",), ("futureFeature",)))
    with pytest.raises(UnsupportedFeatureError) as info:
        check_conflicts(_pending(snap, [_add("a.parquet")]), winner)
    assert info.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_READ"
    assert "futureFeature" in str(info.value)


def test_protocol_deltalog_cannot_write(part: Path) -> None:
    snap = _snapshot(part)
    winner = _built(1, Protocol(1, 7, None, (*_LEGACY, "someFutureWriter")))
    with pytest.raises(UnsupportedFeatureError) as info:
        check_conflicts(_pending(snap, [_add("a.parquet")]), winner)
    assert info.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    assert "someFutureWriter" in str(info.value)


def test_protocol_adding_materialized_partition_columns_fails_writers(part: Path) -> None:
    """The reference's ``failConcurrentTransactionsAtUpgrade``: files written before the
    upgrade lack the partition columns the feature requires."""
    snap = _snapshot(part)
    winner = _built(1, Protocol(1, 7, None, (*_LEGACY, "materializePartitionColumns")))
    with pytest.raises(ProtocolChangedException, match="materializePartitionColumns"):
        check_conflicts(_pending(snap, [_add("a.parquet")]), winner)


def test_two_writers_creating_one_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), _rows([1], [1]), partition_by=["p"])
    winner = _winner(root, 0)
    ours = [Protocol(1, 2), Metadata("id", '{"type":"struct","fields":[]}'), _add("a.parquet")]
    err = _check_raises(
        _pending(None, ours),
        winner,
        ProtocolChangedException,
        "DELTA_PROTOCOL_CHANGED",
        "empty directory",
    )
    assert str(root) in str(err)


# -- 2. metadata ----------------------------------------------------------------------------------


def test_metadata_changed_by_both(part: Path) -> None:
    snap = _snapshot(part)
    DeltaTable(str(part)).alter.set_table_properties({"delta.appendOnly": "false"})
    winner = _winner(part, 1)
    ours = dataclasses.replace(snap.metadata, description="mine")
    _check_raises(
        _pending(snap, [ours]),
        winner,
        MetadataChangedException,
        "DELTA_METADATA_CHANGED",
        "SET TBLPROPERTIES",
        "Conflicting commit:",
    )


def test_metadata_property_outside_allow_list(part: Path) -> None:
    snap = _snapshot(part)
    DeltaTable(str(part)).alter.set_table_properties({"delta.appendOnly": "false"})
    _check_raises(
        _pending(snap, [_add("a.parquet")]),
        _winner(part, 1),
        MetadataChangedException,
        "DELTA_METADATA_CHANGED",
    )


def test_metadata_enabling_deletion_vectors_is_adopted(part: Path) -> None:
    DeltaTable(str(part)).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    snap = _snapshot(part)  # supports deletionVectors
    conf = {**snap.metadata.configuration, "delta.enableDeletionVectors": "true"}
    winner = _built(2, dataclasses.replace(snap.metadata, configuration=conf))
    pending = _pending(snap, [_add("a.parquet")], where=["p = 3"])
    assert check_conflicts(pending, winner).actions is pending.actions
    # Disabling is not an enablement, and without the feature the property cannot be adopted.
    off = dataclasses.replace(snap.metadata, configuration={"delta.enableDeletionVectors": "x"})
    _check_raises(pending, _built(2, off), MetadataChangedException, "DELTA_METADATA_CHANGED")


def test_metadata_enabling_a_feature_the_protocol_lacks(part: Path) -> None:
    snap = _snapshot(part)  # (1, 2): no deletionVectors
    conf = {"delta.enableDeletionVectors": "true"}
    winner = _built(1, dataclasses.replace(snap.metadata, configuration=conf))
    _check_raises(
        _pending(snap, [_add("a.parquet")]),
        winner,
        MetadataChangedException,
        "DELTA_METADATA_CHANGED",
    )


def test_metadata_removing_a_property(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deltalake.write_deltalake(
        str(root), _rows([1], [1]), configuration={"delta.checkpointInterval": "5"}
    )
    snap = _snapshot(root)
    winner = _built(1, dataclasses.replace(snap.metadata, configuration={}))
    _check_raises(
        _pending(snap, [_add("a.parquet", None)]),
        winner,
        MetadataChangedException,
        "DELTA_METADATA_CHANGED",
    )


def test_metadata_column_mapping_enablement_is_adopted(part: Path) -> None:
    snap = _snapshot(part)
    schema = json.loads(snap.metadata.schema_string or "")
    for n, f in enumerate(schema["fields"], start=1):
        f["metadata"] = {"delta.columnMapping.id": n, "delta.columnMapping.physicalName": f["name"]}
    conf = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    md = dataclasses.replace(snap.metadata, schema_string=json.dumps(schema), configuration=conf)
    pending = _pending(snap, [_add("a.parquet")], where=["p = 3"])
    cm = Protocol(2, 7, None, (*_LEGACY, "columnMapping"))
    assert check_conflicts(pending, _built(1, cm, md)).actions is pending.actions
    # Without column mapping in the protocol it conflicts.
    _check_raises(pending, _built(1, md), MetadataChangedException, "DELTA_METADATA_CHANGED")


def test_metadata_identity_high_water_mark_only(part: Path) -> None:
    snap = _snapshot(part)
    md = dataclasses.replace(snap.metadata, schema_string=(snap.metadata.schema_string or "") + " ")
    tags = {"tags": {"delta.identity.schemaUpdate": "true"}}
    pending = _pending(snap, [_add("a.parquet")], where=["p = 3"])
    assert check_conflicts(pending, _built(1, md, extra=tags)).actions is pending.actions
    _check_raises(pending, _built(1, md), MetadataChangedException, "DELTA_METADATA_CHANGED")
    ours = dataclasses.replace(snap.metadata, description="mine")
    _check_raises(
        _pending(snap, [ours]),
        _built(1, md, extra=tags),
        MetadataChangedException,
        "DELTA_METADATA_CHANGED",
    )


def test_metadata_wins_over_appended_files(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    more = _rows([1], [5]).append_column("y", pa.array(["a"]))
    deltalake.write_deltalake(str(part), more, mode="append", schema_mode="merge")
    winner = _winner(part, 1)
    assert winner.metadata is not None and winner.adds  # breaks both rules
    pending = _pending(snap, [_remove(p1)], where=["p = 1"], files=[p1])
    _check_raises(pending, winner, MetadataChangedException, "DELTA_METADATA_CHANGED")


def test_protocol_wins_over_metadata(part: Path) -> None:
    snap = _snapshot(part)
    md = dataclasses.replace(snap.metadata, description="theirs")
    winner = _built(1, Protocol(1, 7, None, _LEGACY), md)
    ours = [Protocol(1, 7, None, _LEGACY), dataclasses.replace(snap.metadata, description="mine")]
    _check_raises(_pending(snap, ours), winner, ProtocolChangedException, "DELTA_PROTOCOL_CHANGED")


# -- 3. domain metadata ---------------------------------------------------------------------------


@pytest.fixture
def domains(tmp_path: Path) -> Path:
    root = tmp_path / "domains"
    deltalake.write_deltalake(str(root), _rows([1, 2], [10, 20]), partition_by=["p"])
    DeltaTable(str(root)).alter.add_feature(
        TableFeatures.DomainMetadata, allow_protocol_versions_increase=True
    )
    return root


def test_domain_metadata_both_write_one_domain(domains: Path) -> None:
    snap = _snapshot(domains)
    winner = _built(2, DomainMetadata("app.cfg", '{"a":1}'))
    _check_raises(
        _pending(snap, [DomainMetadata("app.cfg", '{"a":2}')]),
        winner,
        ConcurrentTransactionException,
        "DELTA_CONCURRENT_TRANSACTION",
        "'app.cfg'",
    )


def test_domain_metadata_no_conflict(domains: Path, part: Path) -> None:
    snap = _snapshot(domains)
    winner = _built(
        2, DomainMetadata("other", "{}"), DomainMetadata("delta.rowTracking", '{"h":1}')
    )
    pending = _pending(
        snap, [DomainMetadata("app.cfg", "{}"), DomainMetadata("delta.rowTracking", '{"h":2}')]
    )
    assert check_conflicts(pending, winner) is pending
    # Without the domainMetadata feature there are no domains to conflict on.
    legacy = _snapshot(part)
    pending = _pending(legacy, [DomainMetadata("other", "{}")])
    assert check_conflicts(pending, winner) is pending


# -- 4. application transactions ------------------------------------------------------------------


def test_app_transaction_read_by_this_transaction(part: Path) -> None:
    snap = _snapshot(part)
    deltalake.write_deltalake(
        str(part),
        _rows([1], [1]),
        mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction("q1", 8)]),
    )
    winner = _winner(part, 1)
    # The winner also added into p=1, which this transaction read: the app id is checked first.
    pending = _pending(snap, [_add("a.parquet")], where=["p = 1"], app_ids=["q1"])
    _check_raises(
        pending, winner, ConcurrentTransactionException, "DELTA_CONCURRENT_TRANSACTION", "'q1'"
    )
    # Another application's id does not conflict.
    check_conflicts(_pending(snap, [_add("a.parquet")], app_ids=["q2"]), winner)


# -- 6. added files -------------------------------------------------------------------------------


def test_append_into_partition_read(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    deltalake.write_deltalake(str(part), _rows([1], [30]), mode="append")
    pending = _pending(snap, [_remove(p1), _add("new.parquet")], where=["p = 1"], files=[p1])
    err = _check_raises(
        pending,
        _winner(part, 1),
        ConcurrentAppendException,
        "DELTA_CONCURRENT_APPEND",
        "partition [p=1]",
        "read version 0",
    )
    assert f"delta.`{snap.table_root}`" in str(err)


def test_append_into_another_partition(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    deltalake.write_deltalake(str(part), _rows([2, 2], [30, 40]), mode="append")
    pending = _pending(snap, [_remove(p1)], where=["p = 1"], files=[p1])
    assert check_conflicts(pending, _winner(part, 1)) is pending


def test_append_isolation_levels(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    blind = _built(1, _add("b.parquet", 1), is_blind_append=True)
    changed = _built(1, _add("b.parquet", 1), is_blind_append=False)

    def pending(level: str, *extra: Action) -> PendingCommit:
        return _pending(snap, [_remove(p1), *extra], where=["p = 1"], files=[p1], level=level)

    # Serializable: a blind append into a partition read conflicts.
    _check_raises(
        pending(SERIALIZABLE), blind, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND"
    )
    # WriteSerializable: blind appends never fail a reader ...
    assert check_conflicts(pending(WRITE_SERIALIZABLE), blind) is not None
    # ... but appends that changed data do,
    _check_raises(
        pending(WRITE_SERIALIZABLE), changed, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND"
    )
    # ... and so does a blind append when this transaction changes the metadata.
    md = dataclasses.replace(snap.metadata, description="mine")
    _check_raises(
        pending(WRITE_SERIALIZABLE, md), blind, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND"
    )
    # SnapshotIsolation (e.g. OPTIMIZE) skips the check.
    check_conflicts(pending(SNAPSHOT_ISOLATION), changed)


def test_blind_append_never_conflicts_on_appends(part: Path) -> None:
    snap = _snapshot(part)
    deltalake.write_deltalake(str(part), _rows([1], [30]), mode="append")
    pending = _pending(snap, [_add("new.parquet", 1)])
    assert pending.is_blind_append
    assert check_conflicts(pending, _winner(part, 1)) is pending


def test_append_unpartitioned_any_add_conflicts(flat: Path) -> None:
    snap = _snapshot(flat)
    deltalake.write_deltalake(str(flat), _rows(None, [30]), mode="append")
    # The reference filters only on partition values: on an unpartitioned table any add of a
    # winner conflicts with a reader, even one whose filter the new file cannot satisfy.
    pending = _pending(snap, [_add("new.parquet", None)], where=["x = 999"])
    err = _check_raises(
        pending, _winner(flat, 1), ConcurrentAppendException, "DELTA_CONCURRENT_APPEND"
    )
    assert "partition [" not in str(err)


def test_append_whole_table_read(part: Path) -> None:
    snap = _snapshot(part)
    deltalake.write_deltalake(str(part), _rows([2], [30]), mode="append")
    pending = _pending(snap, [_add("new.parquet", 1)], whole_table=True)
    _check_raises(
        pending, _winner(part, 1), ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", "[p=2]"
    )


def test_append_read_of_everything(part: Path) -> None:
    snap = _snapshot(part)
    deltalake.write_deltalake(str(part), _rows([2], [30]), mode="append")
    pending = _pending(snap, [_add("new.parquet", 1)], where=["p = 1", None])
    _check_raises(pending, _winner(part, 1), ConcurrentAppendException, "DELTA_CONCURRENT_APPEND")


def test_append_statistics_rule_out_a_match(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    deltalake.write_deltalake(str(part), _rows([1], [30]), mode="append")
    winner = _winner(part, 1)  # x in [30, 30]
    pending = _pending(snap, [_remove(p1)], where=["p = 1 AND x > 100"], files=[p1])
    assert check_conflicts(pending, winner) is pending
    pending = _pending(snap, [_remove(p1)], where=["p = 1 AND x > 20"], files=[p1])
    _check_raises(pending, winner, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", "[p=1]")


def test_append_without_read_predicates(part: Path) -> None:
    # Files read by path (no predicate) on a partitioned table: new files are not candidates.
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    pending = _pending(snap, [_remove(p1)], files=[p1])
    assert check_conflicts(pending, _built(1, _add("b.parquet", 1))) is pending


def test_append_wins_over_deleted_read_files(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    winner = _built(1, _remove(p1, 1), _add("b.parquet", 1), operation="UPDATE")
    pending = _pending(snap, [_remove(p1)], where=["p = 1"], files=[p1])
    _check_raises(pending, winner, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", "UPDATE")


# -- 7. removed files vs files read ---------------------------------------------------------------


def test_delete_of_a_file_read(part: Path) -> None:
    snap = _snapshot(part)
    p2 = _file_in(snap, 2)
    DeltaTable(str(part)).delete("p = 2")
    winner = _winner(part, 1)
    assert [r.path for r in winner.removes] == [p2]
    pending = _pending(snap, [_add("new.parquet", 2)], where=["p = 2"], files=[p2])
    _check_raises(
        pending,
        winner,
        ConcurrentDeleteReadException,
        "DELTA_CONCURRENT_DELETE_READ",
        "DELETE",
        "partition [p=2]",
        p2,
    )


def test_delete_of_other_files_than_read(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    DeltaTable(str(part)).delete("p = 2")
    pending = _pending(snap, [_remove(p1)], where=["p = 1"], files=[p1])
    assert check_conflicts(pending, _winner(part, 1)) is pending


def test_delete_while_whole_table_read(part: Path) -> None:
    snap = _snapshot(part)
    DeltaTable(str(part)).delete("p = 2")
    pending = _pending(snap, [_add("new.parquet", 2)], whole_table=True)
    _check_raises(
        pending,
        _winner(part, 1),
        ConcurrentDeleteReadException,
        "DELTA_CONCURRENT_DELETE_READ",
        "whole table",
    )


def test_delete_read_matches_absolute_and_uri_paths(part: Path) -> None:
    snap = _snapshot(part)
    absolute = f"{snap.table_root}/p=1/f.parquet"
    winner = _built(1, _remove(f"file://{absolute}"), operation="DELETE")
    pending = _pending(snap, [], files=[absolute])
    _check_raises(pending, winner, ConcurrentDeleteReadException, "DELTA_CONCURRENT_DELETE_READ")


# -- 8. removed files vs files removed ------------------------------------------------------------


def test_delete_of_a_file_this_transaction_removes(part: Path) -> None:
    snap = _snapshot(part)
    p2 = _file_in(snap, 2)
    DeltaTable(str(part)).delete("p = 2")
    # Removing without having read it (the read set is empty): only the delete-delete rule.
    pending = _pending(snap, [_remove(p2, 2)])
    _check_raises(
        pending,
        _winner(part, 1),
        ConcurrentDeleteDeleteException,
        "DELTA_CONCURRENT_DELETE_DELETE",
        "partition [p=2]",
        p2,
    )


def test_delete_of_different_files(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    DeltaTable(str(part)).delete("p = 2")
    pending = _pending(snap, [_remove(p1, 1)])
    assert check_conflicts(pending, _winner(part, 1)) is pending


def test_delete_read_wins_over_delete_delete(part: Path) -> None:
    snap = _snapshot(part)
    p2 = _file_in(snap, 2)
    DeltaTable(str(part)).delete("p = 2")
    pending = _pending(snap, [_remove(p2, 2)], where=["p = 2"], files=[p2])
    _check_raises(
        pending, _winner(part, 1), ConcurrentDeleteReadException, "DELTA_CONCURRENT_DELETE_READ"
    )


def test_optimize_conflicts_with_a_reader(part: Path) -> None:
    snap = _snapshot(part)
    p1 = _file_in(snap, 1)
    deltalake.write_deltalake(str(part), _rows([1], [30]), mode="append")
    snap = _snapshot(part)
    DeltaTable(str(part)).optimize.compact()
    winner = _winner(part, 2)
    assert winner.operation == "OPTIMIZE" and all(not r.data_change for r in winner.removes)
    # Its adds (dataChange=false, not a blind append) are candidates like any other, as in the
    # reference: a reader of p=1 fails on them first ...
    pending = _pending(snap, [_remove(p1)], where=["p = 1"], files=[p1])
    _check_raises(pending, winner, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", "[p=1]")
    # ... and a transaction that read p=1's file by path only fails on its removal.
    pending = _pending(snap, [_remove(p1)], files=[p1])
    _check_raises(pending, winner, ConcurrentDeleteReadException, "DELTA_CONCURRENT_DELETE_READ")


# -- 5. rebases -----------------------------------------------------------------------------------


def _type_widening_table(root: Path) -> Path:
    """Commit 0 of a table with type widening supported and enabled (no data)."""
    schema = {
        "type": "struct",
        "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}],
    }
    lines = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"]}},
        {"metaData": {"id": "tw", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableTypeWidening": "true"}}},
    ]  # fmt: skip
    log = root / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def test_type_change_versions_move_past_the_winner(tmp_path: Path) -> None:
    snap = _snapshot(_type_widening_table(tmp_path / "tw"))
    change = {"fromType": "integer", "toType": "long", "tableVersion": 1}
    schema = json.loads(snap.metadata.schema_string or "")
    schema["fields"][0]["metadata"] = {"delta.typeChanges": [change]}
    ours = dataclasses.replace(snap.metadata, schema_string=json.dumps(schema))
    pending = _pending(snap, [ours])
    rebased = check_conflicts(pending, _built(1, _add("a.parquet", None)))
    md = rebased.metadata
    assert md is not None and md.schema_string is not None
    changes = json.loads(md.schema_string)["fields"][0]["metadata"]["delta.typeChanges"]
    assert changes == [{**change, "tableVersion": 2}]
    # A winner at another version leaves it alone.
    assert check_conflicts(pending, _built(5, _add("a.parquet", None))) is pending
