"""The engine-free part of DELETE/UPDATE/MERGE: partition-only conditions, deletion-vector
updates of a file's actions, and the reference's file metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors, write_table
from deltalog.actions import AddCDCFile, AddFile, RemoveFile
from deltalog.commands.dml.file_changes import (
    FileChanges,
    group_row_indexes,
    mark_deleted,
)
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.scan.predicate import parse_predicate
from deltalog.scan.row_filter import is_partition_only, partition_matches
from deltalog.txn import operations


def _table(tmp_path: Path, partitioned: bool = True) -> DeltaLog:
    data = pa.table(
        {"id": list(range(12)), "p": ["a", "b", None] * 4, "v": [i * 1.5 for i in range(12)]}
    )
    write_table(
        str(tmp_path / "t"),
        data,
        partition_by=["p"] if partitioned else None,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    return DeltaLog.for_table(str(tmp_path / "t"))


def test_partition_only_conditions_are_exact_on_partition_values(tmp_path: Path) -> None:
    snapshot = _table(tmp_path).update()
    files = snapshot.all_files_arrow()
    for text, expected in [
        ("p = 'a'", {"a"}),
        ("p != 'a'", {"b"}),  # NULL != 'a' is NULL: that partition's rows stay
        ("p IS NULL", {None}),
        ("p IN ('a', 'b') OR p IS NULL", {"a", "b", None}),
    ]:
        predicate = parse_predicate(text)
        assert is_partition_only(snapshot, predicate)
        mask = partition_matches(snapshot, files, predicate).to_pylist()
        chosen = {
            dict(pv)["p"]
            for pv, m in zip(files["partitionValues"].to_pylist(), mask, strict=True)
            if m
        }
        assert chosen == expected, text
    assert not is_partition_only(snapshot, parse_predicate("p = 'a' AND id > 3"))
    assert not is_partition_only(snapshot, None)


def test_group_row_indexes_sorts_and_dedupes_per_file() -> None:
    keys = pa.array(["f2", "f1", "f2", "f1", "f2"])
    rows = pa.array([9, 4, 1, 4, 3], pa.int64())
    grouped = group_row_indexes(keys, rows)
    assert set(grouped) == {"f1", "f2"}
    assert grouped["f1"].tolist() == [4]
    assert grouped["f2"].tolist() == [1, 3, 9]
    assert group_row_indexes(pa.array([], pa.string()), pa.array([], pa.int64())) == {}


def test_mark_deleted_merges_the_old_vector_and_removes_emptied_files(tmp_path: Path) -> None:
    from deltalog.write.deletion_vectors import DeletionVectorWriter

    log = _table(tmp_path, partitioned=False)
    snapshot = log.update()
    row = snapshot.all_files_arrow().to_pylist()[0]
    store, root = log.store, snapshot.table_root
    with DeletionVectorWriter(store, root, {}, inline_max_size=0) as writer:
        first = mark_deleted(
            row, np.array([1, 5]), store=store, table_root=root, write_vector=writer.add, now=1
        )
    assert first.kind == "added" and first.add is not None and first.deleted_rows == 2
    assert json.loads(first.add.stats or "{}")["tightBounds"] is False
    log.start_transaction().commit([first.remove, first.add], operations.delete(["x"]))
    row = log.update().all_files_arrow().to_pylist()[0]
    with DeletionVectorWriter(store, root, {}, inline_max_size=0) as writer:
        second = mark_deleted(
            row, np.array([0, 7]), store=store, table_root=root, write_vector=writer.add, now=2
        )
    assert second.kind == "updated" and second.add is not None
    assert second.add.deletion_vector is not None
    rows = read_deletion_vector(store, root, second.add.deletion_vector)
    assert rows.tolist() == [0, 1, 5, 7]
    with (
        pytest.raises(errors.InternalError),
        DeletionVectorWriter(store, root, {}, inline_max_size=0) as writer,
    ):
        mark_deleted(
            row, np.array([5]), store=store, table_root=root, write_vector=writer.add, now=3
        )
    with DeletionVectorWriter(store, root, {}, inline_max_size=0) as writer:
        everything = mark_deleted(
            row,
            np.array([r for r in range(12) if r not in (1, 5)]),
            store=store,
            table_root=root,
            write_vector=writer.add,
            now=4,
        )
    assert everything.add is None and everything.kind == "removed"


def test_file_metrics_use_the_reference_names() -> None:
    add = AddFile("n.parquet", {}, 100, 1, True, stats='{"numRecords":3}')
    readd = AddFile(
        "old2.parquet",
        {},
        70,
        1,
        True,
        stats='{"numRecords":9}',
    )
    changes = FileChanges(
        adds=[add],
        removes=[
            RemoveFile("old.parquet", 1, True, size=50),
            RemoveFile("old2.parquet", 1, True, size=70),
        ],
        cdc=[AddCDCFile("_change_data/c.parquet", {}, 30)],
    )
    metrics = changes.metrics()
    assert metrics["numAddedFiles"] == 1 and metrics["numRemovedFiles"] == 2
    assert metrics["numAddedBytes"] == 100 and metrics["numRemovedBytes"] == 120
    assert metrics["numAddedChangeFiles"] == 1 and metrics["changeFileBytes"] == 30
    assert changes.written_rows() == 3
    merge = changes.metrics(merge=True)
    assert merge["numTargetFilesAdded"] == 1 and merge["numTargetChangeFileBytes"] == 30
    assert readd.deletion_vector is None


def test_operations_record_the_reference_parameters() -> None:
    from deltalog.txn.operations import MergePredicate, encode_parameters

    assert encode_parameters(operations.delete(["id > 3"]).parameters) == {
        "predicate": '["id > 3"]'
    }
    assert encode_parameters(operations.update(None).parameters) == {"predicate": "[]"}
    merge = operations.merge(
        "t.id = s.id",
        [MergePredicate("update", "s.v > t.v"), MergePredicate("delete")],
        [MergePredicate("insert")],
        [],
    )
    encoded = encode_parameters(merge.parameters)
    assert json.loads(encoded["matchedPredicates"]) == [
        {"predicate": "s.v > t.v", "actionType": "update"},
        {"actionType": "delete"},
    ]
    assert encoded["notMatchedBySourcePredicates"] == "[]"
