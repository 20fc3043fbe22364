"""CONVERT TO DELTA over parquet directories written by pyarrow; the rows are checked with
``deltalake`` and DuckDB against the input, the stats against the input's values."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import errors
from deltalog.commands.convert import convert_to_delta
from deltalog.errors import DeltaError
from deltalog.schema import parse_schema
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "name": ["a", "b", None, "d"],
        "day": [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3), None],
    }
)


def _schema(ddl: str) -> object:
    fields = []
    for part in ddl.split(","):
        name, typ = part.split()
        fields.append({"name": name, "type": typ, "nullable": True, "metadata": {}})
    return parse_schema(json.dumps({"type": "struct", "fields": fields}))


def test_unpartitioned_rows_and_stats(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    pq.write_table(ROWS.slice(0, 2), root / "part-0.parquet")
    pq.write_table(ROWS.slice(2), root / "part-1.parquet")
    (root / "_SUCCESS").write_text("")
    result = convert_to_delta(str(root))
    assert (result.version, result.num_files, result.converted) == (0, 2, True)
    assert canonical(oracle_rows(str(root))) == canonical(ROWS)
    assert canonical(duckdb_rows(str(root))) == canonical(ROWS)
    dt_ = deltalake.DeltaTable(str(root))
    info = dt_.history(1)[0]
    assert info["operation"] == "CONVERT"
    params = info["operationParameters"]
    assert params["numFiles"] == 2 or params["numFiles"] == "2"
    assert json.loads(params["partitionedBy"]) == []
    assert params["sourceFormat"] == "parquet"
    adds = pa.table(dt_.get_add_actions(flatten=True)).to_pylist()
    by_min = {a["min.id"]: a for a in adds}
    assert by_min[1]["num_records"] == 2 and by_min[1]["max.id"] == 2
    assert by_min[3]["null_count.name"] == 1 and by_min[3]["max.id"] == 4
    # A second conversion finds a Delta table and does nothing.
    assert convert_to_delta(str(root)).converted is False
    assert dt_.version() == 0


def test_partitioned_with_nulls_and_odd_strings(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "p": ["x", "a b", "c/d=e", None, "ü%", "x"],
            "n": pa.array([1, 1, 2, 2, None, 3], pa.int32()),
        }
    )
    pq.write_to_dataset(data, root, partition_cols=["p", "n"])
    convert_to_delta(str(root), _schema("p string,n integer"))  # type: ignore[arg-type]
    expected = canonical(data)
    assert canonical(oracle_rows(str(root))) == expected
    assert canonical(duckdb_rows(str(root))) == expected
    meta = deltalake.DeltaTable(str(root)).metadata()
    assert meta.partition_columns == ["p", "n"]


def test_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DeltaError) as e:
        convert_to_delta(str(empty))
    assert e.value.error_class == "DELTA_CONVERT_EMPTY_DIRECTORY"

    text = tmp_path / "text"
    text.mkdir()
    (text / "a.csv").write_text("1,2\n")
    with pytest.raises(DeltaError) as e:
        convert_to_delta(str(text))
    assert e.value.error_class == "DELTA_CONVERT_NON_PARQUET_TABLE"
    assert not (text / "_delta_log").exists() or not any((text / "_delta_log").iterdir())

    part = tmp_path / "part"
    pq.write_to_dataset(ROWS.append_column("p", pa.array(["1", "x", "1", "2"])), part, ["p"])
    with pytest.raises(DeltaError) as e:
        convert_to_delta(str(part))
    assert e.value.error_class == "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME"
    with pytest.raises(DeltaError) as e:
        convert_to_delta(str(part), _schema("q integer"))  # type: ignore[arg-type]
    assert e.value.error_class == "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME"
    with pytest.raises(DeltaError) as e:
        convert_to_delta(str(part), _schema("p integer"))  # type: ignore[arg-type]
    assert e.value.error_class == "DELTA_FAILED_CAST_PARTITION_VALUE"

    clash = tmp_path / "clash"
    clash.mkdir()
    pq.write_table(pa.table({"a": pa.array([1], pa.int64())}), clash / "0.parquet")
    pq.write_table(pa.table({"a": ["x"]}), clash / "1.parquet")
    with pytest.raises(DeltaError) as e:
        convert_to_delta(str(clash))
    assert e.value.error_class == "DELTA_FAILED_MERGE_SCHEMA_FILE"


def test_parquet_with_geometry_is_refused(tmp_path: Path) -> None:
    """delta-spark's ``ConvertToDeltaCommand`` (DeltaGeoSuite: CONVERT TO DELTA of parquet
    holding a GEOMETRY column): DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES, nothing written."""
    from deltalog.geospatial import WkbType

    wkb = bytes.fromhex("0101000000000000000000F03F0000000000000040")  # POINT(1 2)
    geo = pa.ExtensionArray.from_storage(WkbType(b'{"crs":"OGC:CRS84"}'), pa.array([wkb]))
    pq.write_table(pa.table({"id": [1], "g": geo}), tmp_path / "part-0.parquet")
    with pytest.raises(errors.InvalidArgumentError) as e:
        convert_to_delta(str(tmp_path))
    assert e.value.error_class == "DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES"
    assert "CONVERT TO DELTA" in str(e.value) and "g: geometry" in str(e.value)
    assert not list(tmp_path.glob("_delta_log/*.json"))
