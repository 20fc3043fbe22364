"""DROP FEATURE of reader-writer features with history protection (checkpoint protection and
TRUNCATE HISTORY), checked with ``deltalake`` and DuckDB reading the table afterwards."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.commands.ddl import protocol_change as pc
from deltalog.commands.ddl.drop_feature import (
    BARRIER_CHECKPOINTS,
    PROTECTION_VERSION_KEY,
    drop_feature_support,
)
from deltalog.errors import DeltaError
from deltalog.txn import operations
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

DATA = pa.table({"id": pa.array(range(200), pa.int64()), "part": ["a", "b"] * 100})
# Scattered enough that the vectors go to files, not inline into the log.
DELETED = list(range(0, 200, 3))


def _dv_table(tmp_path: Path) -> str:
    root = str(tmp_path / "t")
    deltalog.write_table(
        root, DATA, partition_by=["part"], configuration={"delta.enableDeletionVectors": "true"}
    )
    deltalog.delete(root, f"id IN ({', '.join(map(str, DELETED))})")
    return root


def _expected() -> list[str]:
    keep = [i not in DELETED for i in DATA["id"].to_pylist()]
    return canonical(DATA.filter(pa.array(keep)))


def _protocol(root: str) -> tuple[list[str] | None, list[str] | None]:
    p = deltalake.DeltaTable(root).protocol()
    rf = sorted(p.reader_features) if p.reader_features is not None else None
    wf = sorted(p.writer_features) if p.writer_features is not None else None
    return rf, wf


def _operations(root: str) -> list[str]:
    return [h["operation"] for h in reversed(deltalake.DeltaTable(root).history())]


def _commit_actions(root: str, version: int) -> list[dict[str, object]]:
    text = (Path(root) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _age_log(root: str, hours: float) -> None:
    """Make every log file older, as if the table's history was written ``hours`` ago."""
    past = time.time() - hours * 3600
    for f in (Path(root) / "_delta_log").iterdir():
        if f.is_file():
            os.utime(f, (past, past))


def test_fast_drop_deletion_vectors_purges_and_protects_checkpoints(tmp_path: Path) -> None:
    root = _dv_table(tmp_path)
    before = deltalake.DeltaTable(root).version()
    version = drop_feature_support(root, "deletionVectors")

    # unset property, REORG purge, DV tombstones, 3 barrier checkpoints, the downgrade
    ops = _operations(root)[before + 1 :]
    assert ops == [
        "UNSET TBLPROPERTIES",
        "REORG",
        "Deletion Vector Tombstones",
        *["Empty Commit"] * BARRIER_CHECKPOINTS,
        "DROP FEATURE",
    ]
    assert version == before + len(ops)
    readers, writers = _protocol(root)
    assert "deletionVectors" not in (readers or []) and "deletionVectors" not in (writers or [])
    assert "checkpointProtection" in (writers or [])
    snapshot = DeltaLog(root).update()
    assert snapshot.metadata.configuration[PROTECTION_VERSION_KEY] == str(version)
    assert snapshot.all_files_arrow()["deletionVector"].null_count == snapshot.num_of_files
    # each barrier and the downgrade version have a checkpoint
    log = Path(root) / "_delta_log"
    checkpointed = {int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet")}
    assert set(range(version - BARRIER_CHECKPOINTS, version + 1)) <= checkpointed
    # vector files of the purged files are tombstoned, so VACUUM may delete them
    dv_files = {p.name for p in Path(root).rglob("deletion_vector_*.bin")}
    assert dv_files
    tombstoned = {
        Path(a["remove"]["path"]).name  # type: ignore[index]
        for a in _commit_actions(root, before + 3)
        if "remove" in a
    }
    assert dv_files <= tombstoned
    # peers read the same rows
    assert canonical(oracle_rows(root)) == _expected()
    assert canonical(duckdb_rows(root)) == _expected()


def test_fast_drop_v2_checkpoint_leaves_classic_checkpoints(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    deltalog.write_table(root, DATA, configuration={"delta.checkpointPolicy": "v2"})
    DeltaLog(root).checkpoint()
    assert list((Path(root) / "_delta_log").glob("*.checkpoint.*.json")) or list(
        (Path(root) / "_delta_log").glob("*.checkpoint.*.parquet")
    )
    version = drop_feature_support(root, "v2Checkpoint")
    readers, writers = _protocol(root)
    assert "v2Checkpoint" not in (readers or []) and "v2Checkpoint" not in (writers or [])
    snapshot = DeltaLog(root).update()
    assert snapshot.metadata.configuration["delta.checkpointPolicy"] == "classic"
    assert snapshot.segment.checkpoint is not None
    assert snapshot.segment.checkpoint.version == version
    assert snapshot.segment.checkpoint.format.name == "SINGLE"
    assert canonical(oracle_rows(root)) == canonical(DATA)


def test_truncate_history_waits_then_drops_once_history_is_old(tmp_path: Path) -> None:
    root = _dv_table(tmp_path)
    with pytest.raises(DeltaError) as e:
        drop_feature_support(root, "deletionVectors", truncate_history=True)
    assert e.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    assert "deletionVectors" in (_protocol(root)[0] or [])
    # run again at once: traces are gone from the current version, but not from history
    with pytest.raises(DeltaError) as e:
        drop_feature_support(root, "deletionVectors", truncate_history=True)
    assert e.value.error_class == "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST"
    # a day later the history that used vectors is truncated and the drop goes through
    _age_log(root, 25)
    version = drop_feature_support(root, "deletionVectors", truncate_history=True)
    readers, writers = _protocol(root)
    assert "deletionVectors" not in (readers or []) and "checkpointProtection" not in (
        writers or []
    )
    first = min(int(p.name[:20]) for p in (Path(root) / "_delta_log").glob("*.json"))
    assert first > 1  # the commits that wrote vectors are gone
    info = _commit_actions(root, version)[0]["commitInfo"]
    assert info["operationParameters"]["truncateHistory"] is True  # type: ignore[index]
    assert canonical(oracle_rows(root)) == _expected()


def test_checkpoint_protection_drops_only_after_history_is_truncated(tmp_path: Path) -> None:
    root = _dv_table(tmp_path)
    protected = drop_feature_support(root, "deletionVectors")
    with pytest.raises(DeltaError) as e:
        drop_feature_support(root, "checkpointProtection", truncate_history=True)
    assert (
        e.value.error_class == "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_WAIT_FOR_RETENTION_PERIOD"
    )
    _age_log(root, 25)
    drop_feature_support(root, "checkpointProtection", truncate_history=True)
    _, writers = _protocol(root)
    assert "checkpointProtection" not in (writers or [])
    assert PROTECTION_VERSION_KEY not in DeltaLog(root).update().metadata.configuration
    remaining = sorted(int(p.name[:20]) for p in (Path(root) / "_delta_log").glob("*.json"))
    assert remaining[0] >= protected
    assert canonical(oracle_rows(root)) == _expected()


def test_column_mapping_in_use_is_removed_by_rewriting_with_logical_names(tmp_path: Path) -> None:
    """A name-mapped, partitioned table with deletion vectors: every file
    is rewritten with the schema's names (vector applied), the mapping leaves the metadata,
    then the feature is dropped behind barrier checkpoints; deltalake and DuckDB read the
    input's rows and the files' parquet columns are the logical names."""
    import pyarrow.parquet as pq

    from deltalog.paths import resolve

    root = str(tmp_path / "t")
    conf = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
    deltalog.write_table(root, DATA, partition_by=["part"], configuration=conf)
    deltalog.delete(root, "id in (" + ",".join(map(str, DELETED)) + ")")
    before = DeltaLog(root).update().all_files_arrow()
    assert before["deletionVector"].null_count < before.num_rows  # a vector to apply

    drop_feature_support(root, "columnMapping")
    readers, writers = _protocol(root)
    assert "columnMapping" not in (readers or []) + (writers or [])
    s = DeltaLog(root).update()
    assert s.column_mapping_mode == "none"
    assert "delta.columnMapping." not in s.metadata.schema_string
    assert "delta.columnMapping.maxColumnId" not in s.metadata.configuration
    files = s.all_files_arrow()
    assert files["deletionVector"].null_count == files.num_rows
    assert not set(files["path"].to_pylist()) & set(before["path"].to_pylist())
    for row in files.to_pylist():
        assert pq.read_schema(resolve(root, row["path"])).names == ["id"]
        assert set(dict(row["partitionValues"])) == {"part"}
    ops = _operations(root)
    assert ops.index("REMOVE COLUMN MAPPING") < ops.index("DROP FEATURE")
    assert canonical(oracle_rows(root)) == _expected()
    assert canonical(duckdb_rows(root)) == _expected()


def test_column_mapping_with_names_parquet_cannot_hold_is_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    data = pa.table({"my id": pa.array([1, 2], pa.int64())})
    deltalog.write_table(root, data, configuration={"delta.columnMapping.mode": "name"})
    version = deltalake.DeltaTable(root).version()
    with pytest.raises(DeltaError) as e:
        drop_feature_support(root, "columnMapping")
    assert e.value.error_class == "DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING"
    assert "my id" in str(e.value)
    assert deltalake.DeltaTable(root).version() == version


def test_vacuum_protocol_check_drops_with_barriers(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    deltalog.write_table(root, DATA)
    pc.add_feature_support(root, "vacuumProtocolCheck")
    drop_feature_support(root, "vacuumProtocolCheck")
    readers, writers = _protocol(root)
    assert "vacuumProtocolCheck" not in (readers or []) + (writers or [])
    assert _operations(root)[-1] == "DROP FEATURE"
    assert _operations(root).count("Empty Commit") == BARRIER_CHECKPOINTS


def test_a_commit_landing_first_fails_the_downgrade(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    deltalog.write_table(root, DATA)
    pc.add_feature_support(root, "vacuumProtocolCheck")
    log = DeltaLog(root)
    txn = log.start_transaction()
    assert txn.snapshot is not None
    readers = set(txn.snapshot.protocol.reader_features or ())
    from deltalog.features import _normalize, _supported

    txn.update_protocol(
        _normalize(_supported(txn.snapshot.protocol) - {"vacuumProtocolCheck"}, readers)
    )
    txn.allow_protocol_downgrade = True
    deltalog.write_table(root, DATA, mode="append")  # wins the next version
    with pytest.raises(DeltaError) as e:
        txn.commit([], operations.drop_table_feature("vacuumProtocolCheck", False))
    assert e.value.error_class == "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL"
    assert "vacuumProtocolCheck" in (_protocol(root)[0] or [])


def test_type_widening_in_use_is_removed_by_rewriting_narrow_files(tmp_path: Path) -> None:
    """A column widened from int to long: the files written while it was int are rewritten as
    long (the newer file stays), the type-change metadata goes, then the feature is dropped
    behind barrier checkpoints; deltalake and DuckDB read the input's rows."""
    import pyarrow.parquet as pq

    from deltalog.paths import resolve

    root = str(tmp_path / "t")
    narrow = pa.table({"id": pa.array(range(6), pa.int32()), "part": ["a", "b"] * 3})
    deltalog.write_table(
        root, narrow, partition_by=["part"], configuration={"delta.enableTypeWidening": "true"}
    )
    log = DeltaLog(root)
    txn = log.start_transaction()
    meta = txn.snapshot.metadata  # type: ignore[union-attr]
    schema = json.loads(meta.schema_string)
    change = [{"toType": "long", "fromType": "integer"}]
    schema["fields"][0].update(type="long", metadata={"delta.typeChanges": change})
    txn.update_metadata(dataclasses.replace(meta, schema_string=json.dumps(schema)))
    txn.commit([], operations.Operation("CHANGE COLUMN", {}))
    wide = pa.table({"id": pa.array([10, 11], pa.int64()), "part": ["a", "b"]})
    deltalog.write_table(root, wide, mode="append")
    wide_files = {a["add"]["path"] for a in _commit_actions(root, 2) if "add" in a}
    assert "typeWidening" in (_protocol(root)[1] or [])

    drop_feature_support(root, "typeWidening")
    readers, writers = _protocol(root)
    assert "typeWidening" not in (readers or []) + (writers or [])
    s = DeltaLog(root).update()
    assert "delta.typeChanges" not in s.metadata.schema_string
    assert "delta.enableTypeWidening" not in s.metadata.configuration
    live = set(s.all_files_arrow()["path"].to_pylist())
    assert wide_files <= live and len(live) == 4  # two rewritten + the two newer ones
    for path in live:
        assert pq.read_schema(resolve(root, path)).field("id").type == pa.int64()
    ops = _operations(root)
    assert ops.index("REORG") < ops.index("DROP FEATURE") and ops[-1] == "DROP FEATURE"
    expected = canonical(pa.concat_tables([narrow.cast(wide.schema), wide]))
    assert canonical(oracle_rows(root)) == expected
    assert canonical(duckdb_rows(root)) == expected
