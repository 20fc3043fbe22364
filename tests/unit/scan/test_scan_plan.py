"""The scan's inputs, built from the snapshot's Arrow state without Spark: local paths, whether
Spark's reader can take the partition columns from hive-style directories, deleted rows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import DeltaLog, errors
from deltalog.paths import resolve
from deltalog.scan.plan import (
    FILE,
    VECTOR,
    deleted_rows,
    scan_inputs,
    snapshot_inputs,
    spark_file_uri,
)
from tests.conformance.oracle import TABLES


def _table(root: Path, column_type: str, files: dict[str, str | None]) -> DeltaLog:
    """One-column data plus partition column ``p`` of ``column_type``; ``files`` maps each file's
    directory (relative, as on disk) to its serialized partition value."""
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": column_type, "nullable": True, "metadata": {}},
    ]
    meta = {"id": "t", "format": {"provider": "parquet", "options": {}}, "configuration": {}}
    meta |= {"schemaString": json.dumps({"type": "struct", "fields": fields})}
    actions: list[dict[str, object]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": meta | {"partitionColumns": ["p"]}},
    ]
    for i, (directory, value) in enumerate(files.items()):
        (root / directory).mkdir(parents=True)
        pq.write_table(pa.table({"id": [i]}), root / directory / "f.parquet")
        log_path = directory.replace("%", "%25") + "/f.parquet"
        add = {"path": log_path, "partitionValues": {"p": value}, "size": 1}
        actions.append({"add": add | {"modificationTime": 0, "dataChange": True}})
    (root / "_delta_log").mkdir()
    text = "\n".join(json.dumps(a) for a in actions) + "\n"
    (root / "_delta_log" / f"{0:020d}.json").write_text(text)
    return DeltaLog(str(root))


def test_hive_directories_supply_partition_columns(tmp_path: Path) -> None:
    # Spark escapes ':' (and '%', '=', ...) in directory names but not a space; null and the
    # empty string are the default partition.
    files = {"p=a%3Ab": "a:b", "p=a b": "a b", "p=__HIVE_DEFAULT_PARTITION__": None}
    log = _table(tmp_path / "t", "string", files)
    snapshot = log.update()
    inputs = snapshot_inputs(snapshot, log.store)
    assert inputs.base_path == snapshot.table_root and inputs.partition_values is None
    expected = [
        resolve(snapshot.table_root, p) for p in snapshot.all_files_arrow()["path"].to_pylist()
    ]
    assert inputs.paths.to_pylist() == expected
    assert snapshot_inputs(snapshot, log.store) is inputs  # cached per snapshot


def test_other_layouts_and_types_join_partition_values(tmp_path: Path) -> None:
    # A space escaped as %20 is not what Spark would decode back to the value.
    log = _table(tmp_path / "a", "string", {"p=a%20b": "a b"})
    snapshot = log.update()
    inputs = scan_inputs(snapshot, log.store, snapshot.all_files_arrow())
    assert inputs.base_path is None and inputs.partition_values is not None
    assert inputs.partition_values.to_pylist() == [
        {FILE: spark_file_uri(inputs.paths[0].as_py()), "p": "a b"}
    ]
    # Spark's cast of a timestamp directory string depends on the session zone: joined.
    log = _table(tmp_path / "b", "timestamp", {"p=2024-01-01 00%3A00%3A00": "2024-01-01 00:00:00"})
    assert snapshot_inputs(log.update(), log.store).base_path is None
    log = _table(tmp_path / "c", "integer", {"p=x": "x"})
    with pytest.raises(errors.InvalidTableError, match="DELTA_INVALID_PARTITION_VALUE"):
        snapshot_inputs(log.update(), log.store)


def test_deleted_rows_of_a_shared_table() -> None:
    log = DeltaLog(str(TABLES / "delta-golden/dv-partitioned-with-checkpoint"))
    snapshot = log.update()
    inputs = snapshot_inputs(snapshot, log.store)
    assert inputs.base_path == snapshot.table_root  # part=N directories
    files = snapshot.all_files_arrow()
    dvs = [dv for dv in files["deletionVector"].to_pylist() if dv]
    cardinality = sum(dv["cardinality"] for dv in dvs)
    # One row per file with a vector, never one per deleted row; those are read when asked.
    vectors = inputs.deletion_vectors
    assert vectors is not None and vectors[VECTOR].to_pylist() == dvs
    assert inputs.deleted_row_count == cardinality > 0
    pairs = deleted_rows(snapshot.table_root, log.store, vectors)
    assert pairs.num_rows == cardinality
    assert set(pairs[FILE].to_pylist()) == set(vectors[FILE].to_pylist())
