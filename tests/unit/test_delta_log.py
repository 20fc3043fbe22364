"""DeltaLog on real tables written by deltalake: update, time travel, bad input."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors
from deltalog.log.filenames import commit_name
from tests.conformance.oracle import oracle_state, our_state


def write(root: Path, rows: range, mode: str = "append", **kw: Any) -> None:
    data = pa.table(
        {"id": pa.array(list(rows), pa.int64()), "part": pa.array([str(i % 3) for i in rows])}
    )
    deltalake.write_deltalake(str(root), data, mode=mode, partition_by=["part"], **kw)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    write(root, range(10))
    write(root, range(10, 20))
    deltalake.DeltaTable(str(root)).delete("id < 5")
    return root


def log_file(root: Path, version: int) -> Path:
    return root / "_delta_log" / commit_name(version)


def test_matches_deltalake_and_reuses_unchanged_snapshot(table: Path) -> None:
    log = DeltaLog.for_table(str(table))
    assert DeltaLog.for_table(str(table)) is log
    s = log.update()
    assert our_state(s) == oracle_state(deltalake.DeltaTable(str(table)), str(table))
    assert log.update() is s


def test_update_replays_only_new_commits(table: Path) -> None:
    log = DeltaLog(str(table))
    before = log.update()
    write(table, range(20, 25))
    expected = oracle_state(deltalake.DeltaTable(str(table)), str(table))
    # Corrupt an old commit: a full replay would now fail, an incremental one never reads it.
    log_file(table, 0).write_text('{"add": {"path": "trunc')
    after = log.update()
    assert after.version == before.version + 1
    assert after is not before
    assert our_state(after) == expected
    with pytest.raises(errors.InvalidTableError) as info:
        DeltaLog(str(table))
    assert info.value.error_class == "DELTA_CORRUPT_COMMIT"
    assert commit_name(0) in str(info.value) and "line 1" in str(info.value)


def test_update_after_a_new_checkpoint(table: Path) -> None:
    log = DeltaLog(str(table))
    log.update()
    write(table, range(30, 33))
    deltalake.DeltaTable(str(table)).create_checkpoint()
    write(table, range(40, 42))
    s = log.update()
    assert s.segment.checkpoint_version == 3
    assert our_state(s) == oracle_state(deltalake.DeltaTable(str(table)), str(table))


def test_stale_snapshot_is_returned_and_refreshed_in_background(table: Path) -> None:
    log = DeltaLog(str(table))
    first = log.update()
    log.staleness_limit_ms = 60_000
    write(table, range(50, 51))
    assert log.update(staleness_acceptable=True) is first  # returns at once
    deadline = time.time() + 10
    while log.snapshot is first and time.time() < deadline:
        time.sleep(0.05)
    assert log.snapshot.version == first.version + 1
    log.staleness_limit_ms = 0  # limit 0: always synchronous
    write(table, range(60, 61))
    assert log.update(staleness_acceptable=True).version == first.version + 2


def test_set_transactions(tmp_path: Path) -> None:
    root = tmp_path / "txn"
    for version in (3, 7):
        write(
            root,
            range(version, version + 1),
            commit_properties=deltalake.CommitProperties(
                app_transactions=[deltalake.Transaction("ingest", version, last_updated=123)]
            ),
        )
    s = DeltaLog(str(root)).update()
    assert s.transaction_version("ingest") == 7
    assert s.transaction_version("other") is None


def test_every_version_and_history(table: Path) -> None:
    log = DeltaLog(str(table))
    for version in range(3):
        expected = oracle_state(deltalake.DeltaTable(str(table), version=version), str(table))
        assert our_state(log.get_snapshot_at(version)) == expected
    history = log.history()
    assert [r.version for r in history] == [2, 1, 0]
    assert history[0].commit_info is not None and history[0].commit_info.operation == "DELETE"
    assert [r.version for r in log.history(limit=1)] == [2]
    with pytest.raises(errors.VersionNotFoundError, match=r"Available versions: \[0, 2\]"):
        log.get_snapshot_at(5)


def test_commit_timestamps_are_monotonized(table: Path) -> None:
    for version, seconds in ((0, 1000), (1, 900), (2, 900)):
        os.utime(log_file(table, version), (seconds, seconds))
    log = DeltaLog(str(table))
    assert [r.timestamp for r in reversed(log.history())] == [1_000_000, 1_000_001, 1_000_002]
    assert log.version_at_timestamp(1_000_001) == 1


def test_in_commit_timestamps(tmp_path: Path) -> None:
    root = tmp_path / "ict"
    (root / "_delta_log").mkdir(parents=True)
    proto = {
        "protocol": {
            "minReaderVersion": 1,
            "minWriterVersion": 7,
            "writerFeatures": ["inCommitTimestamp"],
        }
    }
    md = {
        "metaData": {
            "id": "x",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": '{"type":"struct","fields":[]}',
            "partitionColumns": [],
            "configuration": {"delta.enableInCommitTimestamps": "true"},
        }
    }
    for version, ict in ((0, 5_000), (1, 7_000)):
        lines = [{"commitInfo": {"inCommitTimestamp": ict, "timestamp": 1}}]
        if version == 0:
            lines += [proto, md]
        log_file(root, version).write_text("".join(json.dumps(x) + "\n" for x in lines))
        os.utime(log_file(root, version), (99999, 99999))  # mtimes must not matter
    log = DeltaLog(str(root))
    assert log.update().timestamp == 7_000
    assert log.version_at_timestamp(6_000) == 0
    assert log.version_at_timestamp(7_000) == 1


# -- bad input ---------------------------------------------------------------------------------


def test_truncated_last_line_is_a_typed_error(table: Path) -> None:
    path = log_file(table, 2)
    path.write_bytes(path.read_bytes().rstrip(b"\n")[:-15])
    with pytest.raises(errors.InvalidTableError) as info:
        DeltaLog(str(table))
    assert info.value.error_class == "DELTA_CORRUPT_COMMIT"
    assert commit_name(2) in str(info.value)


def test_version_gap_is_a_typed_error(table: Path) -> None:
    write(table, range(70, 72))
    log_file(table, 2).unlink()
    with pytest.raises(errors.InvalidTableError, match=r"Versions \(1, 3\) are not contiguous"):
        DeltaLog(str(table))


def test_garbage_last_checkpoint_falls_back_to_listing(table: Path) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    (table / "_delta_log" / "_last_checkpoint").write_bytes(b"\x00garbage{")
    s = DeltaLog(str(table)).update()
    assert s.version == 2 and s.segment.checkpoint_version == 2


def test_last_checkpoint_pointing_at_a_missing_checkpoint(table: Path) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    expected = oracle_state(deltalake.DeltaTable(str(table)), str(table))
    (table / "_delta_log" / "00000000000000000002.checkpoint.parquet").unlink()
    s = DeltaLog(str(table)).update()  # every commit is still there: replay them
    assert s.version == 2 and s.segment.checkpoint is None
    assert our_state(s) == expected


def test_missing_checkpoint_part_without_history(table: Path) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    log_dir = table / "_delta_log"
    single = log_dir / "00000000000000000002.checkpoint.parquet"
    # Make it a 2-part checkpoint with part 2 missing, and drop the commits before it.
    single.rename(log_dir / "00000000000000000002.checkpoint.0000000001.0000000002.parquet")
    (log_dir / "_last_checkpoint").write_text('{"version":2,"size":1,"parts":2}')
    for version in (0, 1):
        log_file(table, version).unlink()
    with pytest.raises(errors.InvalidTableError) as info:
        DeltaLog(str(table))
    assert info.value.error_class == "DELTA_MISSING_PART_FILES"


def test_corrupt_checkpoint_falls_back_to_commits(table: Path) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    expected = oracle_state(deltalake.DeltaTable(str(table)), str(table))
    (table / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"PAR1 nope")
    s = DeltaLog(str(table)).update()
    assert s.segment.checkpoint is None
    assert our_state(s) == expected


def test_corrupt_checkpoint_without_commits_is_a_typed_error(table: Path) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    (table / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"PAR1 nope")
    for version in (0, 1):
        log_file(table, version).unlink()
    with pytest.raises(errors.InvalidTableError) as info:
        DeltaLog(str(table))
    assert info.value.error_class == "DELTA_CORRUPT_CHECKPOINT"


def test_not_a_delta_table(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.parquet").write_bytes(b"PAR1")
    for path in (tmp_path / "plain", tmp_path / "missing"):
        log = DeltaLog(str(path))
        assert not log.table_exists()
        with pytest.raises(errors.TableNotFoundError, match="is not a Delta table"):
            log.update()
    (tmp_path / "plain" / "_delta_log").mkdir()
    with pytest.raises(errors.TableNotFoundError):
        DeltaLog(str(tmp_path / "plain")).update()


def test_bad_arguments(table: Path) -> None:
    with pytest.raises(errors.InvalidArgumentError):
        DeltaLog(str(table), engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgumentError):
        DeltaLog(str(table), engine="spark")
    with pytest.raises(ValueError):
        DeltaLog(str(table)).get_snapshot_at("1")  # type: ignore[arg-type]


def test_versions_before_cleanup_are_not_found(table: Path) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    for version in (0, 1):
        log_file(table, version).unlink()
    log = DeltaLog(str(table))
    assert log.update().version == 2
    with pytest.raises(errors.VersionNotFoundError, match=r"Available versions: \[2, 2\]"):
        log.get_snapshot_at(0)
