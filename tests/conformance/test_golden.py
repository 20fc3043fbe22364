"""What the reference implementation's tests assert about the golden tables.

Source: shared/docs/golden.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from deltalog import DeltaLog, errors
from deltalog.log.filenames import commit_name
from tests.conformance.oracle import TABLES

GOLDEN = TABLES / "delta-golden"


def snapshot(name: str) -> Any:
    return DeltaLog(str(GOLDEN / name)).update()


def paths(s: Any) -> set[str]:
    return set(s.all_files_arrow()["path"].to_pylist())


@pytest.mark.parametrize(
    ("name", "version", "num_files"),
    [
        ("checkpoint", 14, 1),
        ("snapshot-data0", 0, 2),
        ("snapshot-data1", 1, 4),
        ("snapshot-data2", 2, 2),
        ("snapshot-data3", 3, 4),
        ("snapshot-data2-deleted", 4, 3),
        ("snapshot-repartitioned", 5, 2),
        ("snapshot-vacuumed", 5, 2),
        ("basic-with-inserts-deletes-checkpoint", 13, 7),
        ("only-checkpoint-files", 2, None),
        ("multi-part-checkpoint", 1, 10),
        ("v2-checkpoint-json", 2, 4),
        ("v2-checkpoint-parquet", 2, 4),
        ("canonicalized-paths-normal-a", 1, 0),
        ("canonicalized-paths-normal-b", 1, 0),
        ("canonicalized-paths-special-a", 1, 0),
        ("canonicalized-paths-special-b", 1, 0),
        ("log-replay-special-characters-a", 1, 0),
        ("125-iterator-bug", 11, None),
    ],
)
def test_versions_and_file_counts(name: str, version: int, num_files: int | None) -> None:
    s = snapshot(name)
    assert s.version == version
    if num_files is not None:
        assert s.all_files_arrow().num_rows == num_files


def test_snapshot_vacuumed_lists_exactly_the_files_left_on_disk() -> None:
    root = GOLDEN / "snapshot-vacuumed"
    on_disk = {p.name for p in root.glob("*.parquet")}
    assert paths(snapshot("snapshot-vacuumed")) == on_disk


def test_multi_part_checkpoint_uses_both_parts() -> None:
    s = snapshot("multi-part-checkpoint")
    assert s.segment.checkpoint is not None
    assert [f.part for f in s.segment.checkpoint.files] == [1, 2]


def test_v2_checkpoints_follow_sidecars() -> None:
    for name in ("v2-checkpoint-json", "v2-checkpoint-parquet"):
        s = snapshot(name)
        assert s.segment.checkpoint is not None and s.segment.checkpoint_version == 2
        assert "v2Checkpoint" in (s.protocol.reader_features or ())
        assert s.all_files_arrow().num_rows == 4


def test_delete_then_re_add_resurrects_the_newest_add() -> None:
    s = snapshot("delete-re-add-same-file-different-transactions")
    files = {r["path"]: r for r in s.all_files_arrow().to_pylist()}
    assert set(files) == {"foo", "bar"}
    assert files["foo"]["modificationTime"] == 1700000000000


def test_dv_key_cases_keep_the_newest_deletion_vector() -> None:
    files = snapshot("log-replay-dv-key-cases").all_files_arrow().to_pylist()
    assert len(files) == 1
    assert files[0]["deletionVector"]["cardinality"] == 3


def test_special_characters_stay_percent_encoded_in_the_log() -> None:
    files = snapshot("log-replay-special-characters-b").all_files_arrow()["path"].to_pylist()
    assert files == ["special%20p@%23h"]


def test_latest_protocol_and_metadata_win() -> None:
    s = snapshot("log-replay-latest-metadata-protocol")
    assert s.schema.names == ["col1", "col2"]
    assert (s.protocol.min_reader_version, s.protocol.min_writer_version) == (3, 7)


def test_commit_info_is_decoded_field_by_field() -> None:
    info = snapshot("deltalog-commit-info").commit_info
    assert info is not None
    assert info.timestamp == 1540415658000
    assert (info.user_id, info.user_name, info.operation) == ("user_0", "username_0", "WRITE")
    assert info.operation_parameters == {"test": "test"}
    assert info.job is not None and (
        info.job.job_id,
        info.job.job_name,
        info.job.run_id,
        info.job.job_owner_id,
        info.job.trigger_type,
    ) == ("job_id_0", "job_name_0", "run_id_0", "job_owner_0", "trigger_type_0")
    assert info.notebook is not None and info.notebook.notebook_id == "notebook_id_0"
    assert info.cluster_id == "cluster_id_0"
    assert info.read_version == -1
    assert info.isolation_level == "default"
    assert info.is_blind_append is True
    assert info.operation_metrics == {"test": "test"}
    assert info.user_metadata == "foo"


def test_non_string_operation_parameters_survive() -> None:
    log = DeltaLog(str(GOLDEN / "commit-info-containing-arbitrary-operationParams-types"))
    ops = {r.version: r.commit_info for r in log.history()}
    assert ops[2] is not None and ops[2].operation_parameters is not None
    assert ops[2].operation_parameters["auto"] is False


def test_empty_last_checkpoint_falls_back_to_listing(copy_table: Any) -> None:
    root = copy_table("delta-golden/corrupted-last-checkpoint")
    (root / "_delta_log" / "_last_checkpoint").write_bytes(b"")
    s = DeltaLog(str(root)).update()
    assert s.version == 10 and s.segment.checkpoint_version == 10
    assert snapshot("corrupted-last-checkpoint-kernel").segment.checkpoint_version == 10


def test_update_after_the_directory_is_deleted(copy_table: Any) -> None:
    import shutil

    root = copy_table("delta-golden/update-deleted-directory")
    log = DeltaLog(str(root))
    assert log.update().all_files_arrow().num_rows == 10
    shutil.rmtree(root)
    with pytest.raises(errors.TableNotFoundError):
        log.update()
    assert not log.table_exists()


def test_no_delta_log_folder_is_not_a_table() -> None:
    log = DeltaLog(str(GOLDEN / "no-delta-log-folder"))
    with pytest.raises(errors.TableNotFoundError):
        log.update()


def test_versions_not_contiguous_message() -> None:
    with pytest.raises(errors.InvalidTableError, match=r"Versions \(0, 2\) are not contiguous"):
        snapshot("versions-not-contiguous")


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("deltalog-state-reconstruction-without-metadata", "metadata"),
        ("deltalog-state-reconstruction-without-protocol", "protocol"),
        ("deltalog-state-reconstruction-from-checkpoint-missing-metadata", "metadata"),
        ("deltalog-state-reconstruction-from-checkpoint-missing-protocol", "protocol"),
    ],
)
def test_missing_protocol_or_metadata(name: str, what: str) -> None:
    with pytest.raises(errors.InvalidTableError, match=f"The {what} of your Delta table") as info:
        snapshot(name)
    assert info.value.error_class == "DELTA_STATE_RECOVER_ERROR"


def test_invalid_protocol_version_names_the_version() -> None:
    with pytest.raises(errors.UnsupportedFeatureError, match="reader version 99"):
        snapshot("deltalog-invalid-protocol-version")


def test_unsupported_reader_features_are_named(copy_table: Any) -> None:
    root = copy_table("delta-golden/basic-with-vacuum-protocol-check-feature")
    commit = root / "_delta_log" / commit_name(2)
    commit.write_text(
        '{"protocol":{"minReaderVersion":3,"minWriterVersion":7,'
        '"readerFeatures":["vacuumProtocolCheck","zzFeature","geospatial","madeUpFeature"],'
        '"writerFeatures":["vacuumProtocolCheck","zzFeature","geospatial","madeUpFeature"]}}\n'
    )
    with pytest.raises(errors.UnsupportedFeatureError) as info:
        DeltaLog(str(root)).update()
    # every unknown one, sorted; the supported ones (geospatial) are not named
    assert info.value.features == ("madeUpFeature", "zzFeature")
    assert "madeUpFeature, zzFeature" in str(info.value)


# -- time travel (mtimes set explicitly: git does not keep them) ------------------------------

START = 1540415658000
MINUTE = 60_000


def _time_travel_table(copy_table: Any) -> Path:
    root = copy_table("delta-golden/time-travel-start-start20-start40")
    for version, offset in ((0, 0), (1, 20), (2, 40)):
        ts = (START + offset * MINUTE) / 1000
        os.utime(root / "_delta_log" / commit_name(version), (ts, ts))
    return root


def test_time_travel_by_version_and_timestamp(copy_table: Any) -> None:
    root = _time_travel_table(copy_table)
    log = DeltaLog(str(root))
    start = paths(log.get_snapshot_at(0))
    assert start == paths(snapshot("time-travel-start"))
    assert paths(log.get_snapshot_at(1)) == paths(snapshot("time-travel-start-start20"))
    assert log.version_at_timestamp(START + 10 * MINUTE) == 0
    assert log.version_at_timestamp(START + 30 * MINUTE) == 1
    for version, offset in ((0, 0), (1, 20), (2, 40)):
        assert log.version_at_timestamp(START + offset * MINUTE) == version
    assert log.get_snapshot_at_timestamp(START + 30 * MINUTE).version == 1
    with pytest.raises(errors.TimestampOutOfRangeError, match="after the latest version") as info:
        log.version_at_timestamp(START + 50 * MINUTE)
    assert info.value.error_class == "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"
    assert log.version_at_timestamp(START + 50 * MINUTE, can_return_last_commit=True) == 2
    with pytest.raises(errors.TimestampOutOfRangeError, match="before the earliest version"):
        log.version_at_timestamp(START - MINUTE)
    for bad in (3, -1):
        with pytest.raises(errors.VersionNotFoundError, match=r"Available versions: \[0, 2\]"):
            log.get_snapshot_at(bad)


def test_time_travel_without_commit_zero(copy_table: Any) -> None:
    # As in the reference test, the log is opened first, then commit 0 disappears.
    root = _time_travel_table(copy_table)
    log = DeltaLog(str(root))
    (root / "_delta_log" / commit_name(0)).unlink()
    with pytest.raises(errors.VersionNotFoundError) as info:
        log.version_at_timestamp(START + 30 * MINUTE)
    assert info.value.error_class == "DELTA_NO_RECREATABLE_HISTORY_FOUND"
    # With no checkpoint, no version can be rebuilt any more: a fresh load says so.
    with pytest.raises(errors.InvalidTableError) as truncated:
        DeltaLog(str(root))
    assert truncated.value.error_class == "DELTA_TRUNCATED_TRANSACTION_LOG"


def test_time_travel_across_schema_and_partition_changes() -> None:
    s = DeltaLog(str(GOLDEN / "time-travel-schema-changes-b")).get_snapshot_at(0)
    assert paths(s) == paths(snapshot("time-travel-schema-changes-a"))
    assert s.schema.names == ["id"]
    p = DeltaLog(str(GOLDEN / "time-travel-partition-changes-b")).get_snapshot_at(0)
    assert paths(p) == paths(snapshot("time-travel-partition-changes-a"))
    assert p.partition_columns == ("part5",)


def test_log_store_list_from() -> None:
    from deltalog.storage import LocalLogStore

    store = LocalLogStore()
    root = str(GOLDEN / "log-store-listFrom")
    names = lambda start: [f.name for f in store.list_from(root, start)]  # noqa: E731
    assert names("0") == ["1", "2", "3"]
    assert names("1") == ["1", "2", "3"]
    assert names("2") == ["2", "3"]
    assert names("3") == ["3"]
    assert names("4") == []
