"""ALTER TABLE's schema changes in the pure core (CHANGE/RENAME/DROP COLUMN, CLUSTER BY):
one metadata commit each with delta-spark's operation, refused where the reference refuses;
delta-rs reads every result (its rows come from the inputs)."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from deltalog import errors
from deltalog.commands.ddl.alter_columns import (
    ColumnChange,
    can_widen,
    change_column,
    cluster_by,
    drop_columns,
    references,
    rename_column,
)
from deltalog.commands.ddl.protocol_change import set_table_properties
from deltalog.commands.optimize.plan import clustering_columns
from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.schema import DecimalType, PrimitiveType
from tests.conformance.rows import duckdb_rows

ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int32()),
        "name": ["a", "b", "c"],
        "p": ["x", "y", "x"],
    }
)


def _table(tmp_path: Path, *, mapping: bool, partitioned: bool = False) -> str:
    root = str(tmp_path / "t")
    conf = {"delta.columnMapping.mode": "name"} if mapping else {}
    write_table(root, ROWS, partition_by=["p"] if partitioned else None, configuration=conf)
    return root


def _last(root: str) -> tuple[str, dict[str, str]]:
    history = deltalake.DeltaTable(root).history(1)[0]
    params = history.get("operationParameters") or {}
    return history["operation"], params


def _rows(root: str) -> list[dict[str, object]]:
    """delta-rs's rows (its DataFusion reader: the pyarrow dataset reader ignores column
    mapping)."""
    table = deltalake.DeltaTable(root)
    result = deltalake.QueryBuilder().register("t", table).execute("select * from t")
    rows = pa.table(result.read_all()).to_pylist()
    return sorted(rows, key=lambda r: r["id"])  # type: ignore[arg-type,return-value]


def _schema(root: str) -> dict[str, object]:
    return json.loads(DeltaLog.for_table(root).update().metadata.schema_string or "{}")


def test_change_column_comment_position_and_nullability(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=False)
    DeltaLog.clear_cache()
    change_column(root, ColumnChange(("name",), comment="who", position="FIRST"))
    assert _last(root)[0] == "CHANGE COLUMN"
    op_column = json.loads(_last(root)[1]["column"])
    assert op_column["name"] == "name" and op_column["metadata"] == {"comment": "who"}
    assert _last(root)[1]["position"] == "FIRST"
    change_column(root, ColumnChange(("id",), position="AFTER p"))
    assert [f["name"] for f in _schema(root)["fields"]] == ["name", "p", "id"]  # type: ignore[index]
    assert _rows(root) == sorted(ROWS.to_pylist(), key=lambda r: r["id"])
    with pytest.raises(errors.DeltaWriteError, match="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"):
        change_column(root, ColumnChange(("id",), nullable=False))
    with pytest.raises(errors.InvalidArgumentError, match="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"):
        change_column(root, ColumnChange(("id",), position="AFTER nope"))


def test_type_change_needs_widening_and_records_it(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=False)
    with pytest.raises(errors.DeltaWriteError, match="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"):
        change_column(root, ColumnChange(("id",), data_type=PrimitiveType("long")))
    set_table_properties(root, {"delta.enableTypeWidening": "true"})
    with pytest.raises(errors.DeltaWriteError, match="CHANGE_COL_OP"):
        change_column(root, ColumnChange(("id",), data_type=PrimitiveType("short")))  # narrowing
    change_column(root, ColumnChange(("id",), data_type=PrimitiveType("long")))
    field = _schema(root)["fields"][0]  # type: ignore[index]
    assert field["type"] == "long"
    assert field["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    snapshot = DeltaLog.for_table(root).update()
    assert "typeWidening" in (snapshot.protocol.writer_features or ())
    appended = ROWS.set_column(0, "id", pa.array([2**40, 5, 6], pa.int64()))
    write_table(root, appended, mode="append")
    # delta-rs 1.6 cannot read typeWidening: DuckDB's delta extension (delta-kernel-rs) is the
    # oracle here.
    rows = duckdb_rows(root).to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 5, 6, 2**40]


def test_widening_rules_follow_the_protocol() -> None:
    p = PrimitiveType
    assert can_widen(p("byte"), p("integer")) and can_widen(p("integer"), p("double"))
    assert can_widen(p("date"), p("timestamp_ntz")) and not can_widen(p("long"), p("double"))
    assert can_widen(DecimalType(10, 2), DecimalType(11, 3))
    assert not can_widen(DecimalType(10, 2), DecimalType(11, 4))
    assert can_widen(p("long"), DecimalType(22, 2)) and not can_widen(p("long"), DecimalType(21, 2))
    assert not can_widen(p("string"), p("integer")) and not can_widen(p("long"), p("integer"))


def test_rename_and_drop_need_column_mapping(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=False)
    with pytest.raises(errors.UnsupportedFeatureError, match="DELTA_UNSUPPORTED_RENAME_COLUMN"):
        rename_column(root, ["name"], "label")
    with pytest.raises(errors.UnsupportedFeatureError, match="DELTA_UNSUPPORTED_DROP_COLUMN"):
        drop_columns(root, [["name"]])
    version = DeltaLog.for_table(root).update().version
    assert version == 0  # nothing committed


def test_rename_and_drop_with_column_mapping(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=True, partitioned=True)
    rename_column(root, ["name"], "label")
    assert _last(root) == ("RENAME COLUMN", {"oldColumnPath": "name", "newColumnPath": "label"})
    rename_column(root, ["P"], "part")  # a partition column follows in partitionColumns
    assert DeltaLog.for_table(root).update().metadata.partition_columns == ("part",)
    expected = [{"id": r["id"], "label": r["name"], "part": r["p"]} for r in ROWS.to_pylist()]
    assert _rows(root) == expected
    with pytest.raises(errors.DeltaWriteError, match="DUPLICATE"):
        rename_column(root, ["label"], "ID")
    with pytest.raises(errors.DeltaWriteError, match="DROP_PARTITION_COLUMN"):
        drop_columns(root, [["part"]])
    drop_columns(root, [["label"]])
    assert _last(root)[0] == "DROP COLUMNS"
    assert json.loads(_last(root)[1]["columns"]) == ["label"]
    assert _rows(root) == [{"id": r["id"], "part": r["part"]} for r in expected]
    assert drop_columns(root, [["gone"]], if_exists=True) is None
    with pytest.raises(errors.InvalidArgumentError, match="COLUMN_NOT_FOUND"):
        drop_columns(root, [["gone"]])


def test_constraints_and_generated_columns_block_changes(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=True)
    set_table_properties(root, {"delta.constraints.positive": "`id` > 0 AND name <> 'p'"})
    with pytest.raises(errors.DeltaWriteError, match="DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"):
        drop_columns(root, [["id"]])
    with pytest.raises(errors.DeltaWriteError, match="DEPENDENT_COLUMN_CHANGE"):
        rename_column(root, ["name"], "n")
    rename_column(root, ["p"], "q")  # 'p' only inside a string literal
    assert references("upper(`a b`) = 'x'", ["a b"]) and not references("'id' = c", ["id"])


def test_cluster_by_and_none(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=False)
    assert cluster_by(root, None) is None  # never clustered: no commit
    cluster_by(root, ["name", "id"])
    snapshot = DeltaLog.for_table(root).update()
    assert clustering_columns(snapshot) == ("name", "id")
    assert "clustering" in (snapshot.protocol.writer_features or ())
    assert _last(root) == (
        "CLUSTER BY",
        {"oldClusteringColumns": "", "newClusteringColumns": "name,id"},
    )
    cluster_by(root, [])
    assert clustering_columns(DeltaLog.for_table(root).update()) == ()
    assert _last(root)[1]["oldClusteringColumns"] == "name,id"
    partitioned = _table(tmp_path / "p", mapping=False, partitioned=True)
    with pytest.raises(errors.DeltaWriteError, match="CLUSTER_BY_ON_PARTITIONED_TABLE"):
        cluster_by(partitioned, ["id"])
    with pytest.raises(errors.InvalidArgumentError, match="INVALID_NUM_COLUMNS"):
        cluster_by(root, ["id", "name", "p", "id", "name"])
    assert _rows(root) == sorted(ROWS.to_pylist(), key=lambda r: r["id"])


def test_concurrent_metadata_change_conflicts(tmp_path: Path) -> None:
    root = _table(tmp_path, mapping=True)
    log = DeltaLog.for_table(root)
    txn = log.start_transaction()  # reads version 0
    rename_column(root, ["name"], "label")  # wins version 1
    assert txn.snapshot is not None
    txn.update_metadata(txn.snapshot.metadata)
    with pytest.raises(errors.MetadataChangedException):
        txn.commit([], "SET TBLPROPERTIES")
