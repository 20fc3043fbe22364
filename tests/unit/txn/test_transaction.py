"""The optimistic transaction and its committer, on real logs (no Spark, no mocks).

Files named by these commits need not exist: the log is what is under test here."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from deltalog import DeltaLog, errors
from deltalog.actions import (
    AddFile,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    action_from_json,
)
from deltalog.features import is_feature_supported
from deltalog.schema import PrimitiveType, StructField, StructType
from deltalog.txn import operations

SCHEMA = StructType(
    (StructField("id", PrimitiveType("long")), StructField("p", PrimitiveType("string")))
)


def _metadata(partitioned: bool = True, **conf: str) -> Metadata:
    return Metadata(
        id="11111111-2222-3333-4444-555555555555",
        schema_string=SCHEMA.to_json(),
        partition_columns=("p",) if partitioned else (),
        configuration=dict(conf),
        created_time=1,
    )


def _add(path: str, p: str | None = "a", rows: int = 1) -> AddFile:
    values = {"p": p} if p is not None else {}
    stats = json.dumps({"numRecords": rows, "minValues": {"id": 0}, "maxValues": {"id": rows}})
    return AddFile(path, values, 10, 1, True, stats)


def _lines(root: Path, version: int) -> list[dict]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _create(root: Path, partitioned: bool = True, **conf: str) -> DeltaLog:
    log = DeltaLog.for_table(str(root))
    txn = log.start_transaction()
    txn.update_metadata(_metadata(partitioned, **conf))
    op = operations.create_table("CREATE TABLE", partition_by=["p"] if partitioned else [])
    assert txn.commit([], op) == 0
    return log


def test_first_commit_writes_protocol_metadata_and_commit_info(tmp_path: Path) -> None:
    _create(tmp_path)
    lines = _lines(tmp_path, 0)
    assert list(lines[0]) == ["commitInfo"]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "CREATE TABLE"
    assert "readVersion" not in info
    assert info["isolationLevel"] == "Serializable"
    assert info["engineInfo"].startswith("deltalog/")
    assert info["operationParameters"]["partitionBy"] == '["p"]'
    assert lines[1] == {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    assert lines[2]["metaData"]["partitionColumns"] == ["p"]


def test_commit_info_for_an_append(tmp_path: Path) -> None:
    log = _create(tmp_path)
    txn = log.start_transaction(user_metadata="nightly")
    op = operations.write("append", ["p"]).with_metrics({"numFiles": 1, "numOutputRows": 3})
    assert txn.commit([_add("a.parquet", rows=3)], op) == 1
    info = _lines(tmp_path, 1)[0]["commitInfo"]
    assert info["operationParameters"] == {"mode": "Append", "partitionBy": '["p"]'}
    assert info["readVersion"] == 0
    assert info["isBlindAppend"] is True
    assert info["operationMetrics"] == {"numFiles": "1", "numOutputRows": "3"}
    assert info["userMetadata"] == "nightly"
    assert len(info["txnId"]) == 36


def test_new_table_without_metadata_is_refused(tmp_path: Path) -> None:
    txn = DeltaLog.for_table(str(tmp_path)).start_transaction()
    with pytest.raises(errors.DeltaWriteError) as e:
        txn.commit([_add("a.parquet")], "WRITE")
    assert e.value.error_class == "DELTA_METADATA_ABSENT"
    assert not (tmp_path / "_delta_log").exists() or not os.listdir(tmp_path / "_delta_log")


def test_empty_write_commits_nothing(tmp_path: Path) -> None:
    log = _create(tmp_path)
    assert log.start_transaction().commit_if_needed([], operations.write("append")) is None
    assert log.update().version == 0


def test_losing_the_race_without_conflict_retries_at_the_next_version(tmp_path: Path) -> None:
    log = _create(tmp_path)
    first, second = log.start_transaction(), log.start_transaction()
    assert first.commit([_add("a.parquet")], operations.write("append")) == 1
    assert second.commit([_add("b.parquet")], operations.write("append")) == 2
    assert _lines(tmp_path, 2)[0]["commitInfo"]["readVersion"] == 0
    paths = set(log.update().all_files_arrow().column("path").to_pylist())
    assert paths == {"a.parquet", "b.parquet"}


def test_a_conflict_raises_and_commits_nothing(tmp_path: Path) -> None:
    log = _create(tmp_path)
    log.start_transaction().commit([_add("a.parquet")], operations.write("append"))
    reader = log.start_transaction()
    reader.filter_files("p = 'a'")
    log.start_transaction().commit([_add("b.parquet", "a")], operations.write("append"))
    with pytest.raises(errors.ConcurrentAppendException) as e:
        reader.commit([RemoveFile("a.parquet", 5)], operations.Operation("DELETE"))
    assert e.value.version == 2
    assert log.update().version == 2


def test_commits_are_never_overwritten(tmp_path: Path) -> None:
    log = _create(tmp_path)
    before = (tmp_path / "_delta_log" / f"{0:020d}.json").read_bytes()
    txn = log.start_transaction()
    txn.commit([_add("a.parquet")], operations.write("append"))
    assert (tmp_path / "_delta_log" / f"{0:020d}.json").read_bytes() == before


def test_a_stale_empty_commit_file_is_not_skipped_over(tmp_path: Path) -> None:
    log = _create(tmp_path)
    txn = log.start_transaction()
    (tmp_path / "_delta_log" / f"{1:020d}.json").write_bytes(b"")
    with pytest.raises(errors.InvalidTableError) as e:
        txn.commit([_add("a.parquet")], operations.write("append"))
    assert e.value.error_class == "DELTA_EMPTY_COMMIT_FILE"
    assert not (tmp_path / "_delta_log" / f"{2:020d}.json").exists()


def test_append_only_tables_refuse_removes(tmp_path: Path) -> None:
    log = _create(tmp_path, **{"delta.appendOnly": "true"})
    log.start_transaction().commit([_add("a.parquet")], operations.write("append"))
    with pytest.raises(errors.DeltaWriteError) as e:
        log.start_transaction().commit([RemoveFile("a.parquet", 5)], "DELETE")
    assert e.value.error_class == "DELTA_CANNOT_MODIFY_APPEND_ONLY"
    # A remove that changes no data (a compaction) is allowed.
    op = operations.Operation("OPTIMIZE")
    assert (
        log.start_transaction().commit(
            [RemoveFile("a.parquet", 5, data_change=False), _add("b.parquet")], op
        )
        == 2
    )


def test_partition_values_must_name_the_partition_columns(tmp_path: Path) -> None:
    log = _create(tmp_path)
    with pytest.raises(errors.DeltaWriteError) as e:
        log.start_transaction().commit([_add("a.parquet", p=None)], "WRITE")
    assert e.value.error_class == "DELTA_INVALID_PARTITIONING_SCHEMA"


def test_duplicate_file_actions_are_refused(tmp_path: Path) -> None:
    log = _create(tmp_path)
    with pytest.raises(errors.DeltaWriteError) as e:
        log.start_transaction().commit([_add("a.parquet"), _add("a.parquet")], "WRITE")
    assert e.value.error_class == "DELTA_DUPLICATE_ACTIONS_FOUND"


def test_no_data_change_commits_use_snapshot_isolation(tmp_path: Path) -> None:
    log = _create(tmp_path)
    log.start_transaction().commit([_add("a.parquet")], operations.write("append"))
    txn = log.start_transaction()
    txn.filter_files()
    txn.commit(
        [
            RemoveFile("a.parquet", 5, data_change=False),
            replace(_add("b.parquet"), data_change=False),
        ],
        operations.Operation("OPTIMIZE"),
    )
    info = _lines(tmp_path, 2)[0]["commitInfo"]
    assert info["isolationLevel"] == "SnapshotIsolation"
    assert info["isBlindAppend"] is False


def test_app_transactions_are_recorded_and_read(tmp_path: Path) -> None:
    log = _create(tmp_path)
    txn = log.start_transaction()
    assert txn.txn_version("app") is None
    txn.commit([SetTransaction("app", 3, 100), _add("a.parquet")], operations.write("append"))
    assert log.start_transaction().txn_version("app") == 3


def test_protocol_follows_the_properties(tmp_path: Path) -> None:
    _create(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    proto = action_from_json(json.dumps(_lines(tmp_path, 0)[1]))
    assert isinstance(proto, Protocol)
    assert is_feature_supported(proto, "changeDataFeed")
    assert not is_feature_supported(proto, "deletionVectors")


def test_protocol_cannot_go_down(tmp_path: Path) -> None:
    log = _create(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    txn = log.start_transaction()
    txn.update_protocol(Protocol(1, 2))
    with pytest.raises(errors.DeltaWriteError) as e:
        txn.commit([], "SET TBLPROPERTIES")
    assert e.value.error_class == "DELTA_INVALID_PROTOCOL_DOWNGRADE"


def test_in_commit_timestamps_increase_and_come_first(tmp_path: Path) -> None:
    log = _create(tmp_path, **{"delta.enableInCommitTimestamps": "true"})
    first = _lines(tmp_path, 0)[0]["commitInfo"]
    assert next(iter(first)) == "inCommitTimestamp"
    for name in ("a", "b", "c"):
        log.start_transaction().commit([_add(f"{name}.parquet")], operations.write("append"))
    stamps = [_lines(tmp_path, v)[0]["commitInfo"]["inCommitTimestamp"] for v in range(4)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4
    DeltaLog.clear_cache()
    assert DeltaLog.for_table(str(tmp_path)).update().timestamp == stamps[-1]


def test_enabling_in_commit_timestamps_later_records_the_enablement(tmp_path: Path) -> None:
    log = _create(tmp_path)
    txn = log.start_transaction()
    txn.update_metadata(_metadata(**{"delta.enableInCommitTimestamps": "true"}))
    assert txn.commit([], "SET TBLPROPERTIES") == 1
    lines = _lines(tmp_path, 1)
    conf = next(line["metaData"]["configuration"] for line in lines if "metaData" in line)
    assert conf["delta.inCommitTimestampEnablementVersion"] == "1"
    assert conf["delta.inCommitTimestampEnablementTimestamp"] == str(
        lines[0]["commitInfo"]["inCommitTimestamp"]
    )


def test_checkpoint_every_interval(tmp_path: Path) -> None:
    log = _create(tmp_path, **{"delta.checkpointInterval": "3"})
    for i in range(7):
        log.start_transaction().commit([_add(f"f{i}.parquet")], operations.write("append"))
    names = sorted(os.listdir(tmp_path / "_delta_log"))
    checkpoints = [n for n in names if "checkpoint.parquet" in n]
    assert checkpoints == [f"{3:020d}.checkpoint.parquet", f"{6:020d}.checkpoint.parquet"]
    last = json.loads((tmp_path / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 6
    DeltaLog.clear_cache()
    snap = DeltaLog.for_table(str(tmp_path)).update()
    assert snap.segment.checkpoint_version == 6 and snap.num_of_files == 7
