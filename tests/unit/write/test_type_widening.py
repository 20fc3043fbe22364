"""Type widening in schema evolution (reference ``TypeWidening``, ``TypeWideningMode``,
``TypeWideningMetadata``, ``SchemaMergingUtils.mergeSchemas``): which changes a merged schema
takes, the ``delta.typeChanges`` it records, and a ``write_table`` append that widens a column,
read back by DuckDB's delta extension (delta-rs 1.6 refuses ``typeWidening``) and deltalog."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import errors
from deltalog.commands.ddl.protocol_change import set_table_properties
from deltalog.commands.write.write_table import write_table
from deltalog.data_files import TableLayout, read_parquet, to_logical
from deltalog.delta_log import DeltaLog
from deltalog.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
)
from deltalog.write.schema_evolution import merge_schema
from deltalog.write.type_widening import (
    NO_WIDENING,
    WideningMode,
    is_type_change_supported,
    record_type_changes,
    widening_mode,
)
from tests.conformance.rows import duckdb_rows

T = "/tmp/t"
p = PrimitiveType
ALWAYS = WideningMode("always")
SAME_FAMILY = WideningMode("same_family_type")


def f(name: str, t: DataType, meta: dict[str, object] | None = None) -> StructField:
    return StructField(name, t, True, meta or {})


def s(*fields: StructField) -> StructType:
    return StructType(fields)


# -- the rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "always", "same_family", "iceberg"),
    [
        (p("byte"), p("short"), True, True, True),
        (p("short"), p("long"), True, True, True),
        (p("integer"), p("long"), True, True, True),
        (p("float"), p("double"), True, True, True),
        (p("date"), p("timestamp_ntz"), True, True, False),
        (p("integer"), p("double"), True, False, False),
        (p("byte"), DecimalType(10, 0), True, False, False),
        (p("long"), DecimalType(20, 0), True, False, False),
        (DecimalType(10, 2), DecimalType(12, 2), True, True, True),
        (DecimalType(10, 2), DecimalType(12, 4), True, True, False),
        # narrowing, or not within the protocol's list: never automatic
        (p("long"), p("integer"), False, False, False),
        (p("long"), p("double"), False, False, False),
        (p("byte"), DecimalType(9, 0), False, False, False),
        (DecimalType(10, 2), DecimalType(11, 4), False, False, False),
        (p("integer"), p("string"), False, False, False),
        (p("date"), p("timestamp"), False, False, False),
    ],
)
def test_modes_follow_the_reference(
    old: DataType, new: DataType, always: bool, same_family: bool, iceberg: bool
) -> None:
    assert (ALWAYS.widened(old, new) == new) is always
    assert (SAME_FAMILY.widened(old, new) == new) is same_family
    assert (WideningMode("always", iceberg_only=True).widened(old, new) == new) is iceberg
    assert WideningMode("never").widened(old, new) is None
    assert is_type_change_supported(old, new) is always


def test_mode_needs_the_table_property_and_a_known_setting() -> None:
    on = {"delta.enableTypeWidening": "true"}
    assert widening_mode({}) == NO_WIDENING
    assert widening_mode({"delta.enableTypeWidening": "false"}) == NO_WIDENING
    assert widening_mode(on) == ALWAYS
    assert widening_mode(on, "SAME_FAMILY_TYPE") == SAME_FAMILY
    uniform = {**on, "delta.universalFormat.enabledFormats": "iceberg"}
    assert widening_mode(uniform).iceberg_only
    with pytest.raises(errors.InvalidArgumentError, match="allowAutomaticWidening"):
        widening_mode(on, "sometimes")


# -- merging ----------------------------------------------------------------------------------


def test_merge_widens_atomic_types_at_every_depth() -> None:
    table = s(
        f("a", p("integer")),
        f("st", s(f("x", p("short")))),
        f("arr", ArrayType(p("float"), True)),
        f("m", MapType(p("integer"), DecimalType(5, 2), True)),
    )
    data = s(
        f("A", p("long")),
        f("st", s(f("x", p("integer")))),
        f("arr", ArrayType(p("double"), True)),
        f("m", MapType(p("long"), DecimalType(7, 3), True)),
    )
    merged = merge_schema(table, data, merge=True, table_root=T, widening=ALWAYS)
    assert merged == s(
        f("a", p("long")),
        f("st", s(f("x", p("integer")))),
        f("arr", ArrayType(p("double"), True)),
        f("m", MapType(p("long"), DecimalType(7, 3), True)),
    )


def test_without_type_widening_a_wider_type_fails_to_merge() -> None:
    table = s(f("a", p("integer")))
    with pytest.raises(errors.DeltaWriteError, match="DELTA_FAILED_TO_MERGE_FIELDS") as e:
        merge_schema(table, s(f("a", p("long"))), merge=True, table_root=T)
    assert e.value.__cause__ is not None
    assert "DELTA_MERGE_INCOMPATIBLE_DATATYPE" in str(e.value.__cause__)
    # enabled but without mergeSchema: the widened schema is a mismatch
    with pytest.raises(errors.DeltaWriteError, match="DELTA_METADATA_MISMATCH"):
        merge_schema(table, s(f("a", p("long"))), merge=False, table_root=T, widening=ALWAYS)
    # a narrower type is never widened to: it fails as before
    with pytest.raises(errors.DeltaWriteError, match="DELTA_FAILED_TO_MERGE_FIELDS"):
        merge_schema(s(f("a", p("long"))), s(f("a", p("integer"))), merge=True, table_root=T)
    # same_family_type leaves integer -> double to ALTER
    with pytest.raises(errors.DeltaWriteError, match="DELTA_FAILED_TO_MERGE_FIELDS"):
        merge_schema(table, s(f("a", p("double"))), merge=True, table_root=T, widening=SAME_FAMILY)


def test_merge_rules_keep_the_table_type_and_skip_nested_fields() -> None:
    table = s(f("a", p("long")), f("st", s(f("x", p("integer")))))
    data = s(f("a", p("integer")), f("st", s(f("x", p("long")), f("y", p("string")))))
    merged = merge_schema(
        table,
        data,
        merge=True,
        table_root=T,
        widening=ALWAYS,
        implicit_conversions=True,
        nested_fields=False,
    )
    assert merged == s(f("a", p("long")), f("st", s(f("x", p("long")))))


# -- delta.typeChanges ------------------------------------------------------------------------


def test_type_changes_are_recorded_as_the_reference_does() -> None:
    old = s(
        f(
            "a",
            p("integer"),
            {"comment": "c", "delta.typeChanges": [{"fromType": "byte", "toType": "integer"}]},
        ),
        f("st", s(f("x", p("short")))),
        f("m", MapType(p("integer"), ArrayType(p("float"), True), True)),
        f("same", p("string")),
    )
    new = s(
        f(
            "a",
            p("long"),
            {"comment": "c", "delta.typeChanges": [{"fromType": "byte", "toType": "integer"}]},
        ),
        f("st", s(f("x", p("integer")), f("y", p("long")))),
        f("m", MapType(p("long"), ArrayType(p("double"), True), True)),
        f("same", p("string")),
        f("new", p("long")),
    )
    recorded = json.loads(record_type_changes(new, old).to_json())
    by_name = {x["name"]: x for x in recorded["fields"]}
    assert by_name["a"]["metadata"] == {
        "comment": "c",
        "delta.typeChanges": [
            {"fromType": "byte", "toType": "integer"},
            {"fromType": "integer", "toType": "long"},
        ],
    }
    nested = {x["name"]: x for x in by_name["st"]["type"]["fields"]}
    assert nested["x"]["metadata"] == {
        "delta.typeChanges": [{"fromType": "short", "toType": "integer"}]
    }
    assert nested["y"]["metadata"] == {}
    assert by_name["m"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "integer", "toType": "long", "fieldPath": "key"},
        {"fromType": "float", "toType": "double", "fieldPath": "value.element"},
    ]
    assert by_name["st"]["metadata"] == by_name["same"]["metadata"] == {}
    assert by_name["new"]["metadata"] == {}
    preview = json.loads(record_type_changes(new, old, preview_version=7).to_json())
    assert preview["fields"][2]["metadata"]["delta.typeChanges"][0] == {
        "tableVersion": 7,
        "fromType": "integer",
        "toType": "long",
        "fieldPath": "key",
    }


# -- write_table ------------------------------------------------------------------------------

NARROW = pa.table(
    {
        "id": pa.array([1, 2], pa.int32()),
        "f": pa.array([1.5, 2.5], pa.float32()),
        "d": pa.array([Decimal("1.25"), Decimal("2.50")], pa.decimal128(5, 2)),
        "day": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)], pa.date32()),
    }
)
WIDE = pa.table(
    {
        "id": pa.array([2**40], pa.int64()),
        "f": pa.array([0.1], pa.float64()),
        "d": pa.array([Decimal("123.456")], pa.decimal128(8, 3)),
        "day": pa.array([dt.datetime(2024, 1, 3, 12, 30)], pa.timestamp("us")),
    }
)


def _fields(root: str) -> dict[str, dict[str, object]]:
    schema = DeltaLog.for_table(root).update().metadata.schema_string
    assert schema is not None
    return {x["name"]: x for x in json.loads(schema)["fields"]}


def test_append_with_merge_schema_widens_and_records(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    write_table(root, NARROW)
    with pytest.raises(errors.DeltaWriteError, match="DELTA_FAILED_TO_MERGE_FIELDS"):
        write_table(root, WIDE, mode="append", schema_mode="merge")
    set_table_properties(root, {"delta.enableTypeWidening": "true"})
    with pytest.raises(errors.DeltaWriteError, match="DELTA_METADATA_MISMATCH"):
        write_table(root, WIDE, mode="append")
    # date -> timestamp_ntz needs timestampNtz, which existing tables enable by hand
    with pytest.raises(errors.DeltaWriteError, match=r"MANUAL_ENABLEMENT.*timestampNtz"):
        write_table(root, WIDE, mode="append", schema_mode="merge")
    set_table_properties(root, {"delta.feature.timestampNtz": "supported"})
    version = write_table(root, WIDE, mode="append", schema_mode="merge")
    assert version == 3
    fields = _fields(root)
    assert {k: v["type"] for k, v in fields.items()} == {
        "id": "long",
        "f": "double",
        "d": "decimal(8,3)",
        "day": "timestamp_ntz",
    }
    assert [v["metadata"] for v in fields.values()] == [
        {"delta.typeChanges": [{"fromType": "integer", "toType": "long"}]},
        {"delta.typeChanges": [{"fromType": "float", "toType": "double"}]},
        {"delta.typeChanges": [{"fromType": "decimal(5,2)", "toType": "decimal(8,3)"}]},
        {"delta.typeChanges": [{"fromType": "date", "toType": "timestamp_ntz"}]},
    ]
    snapshot = DeltaLog.for_table(root).update()
    assert "typeWidening" in (snapshot.protocol.writer_features or ())
    # the old files keep their narrow types; readers widen them
    old_file = sorted(tmp_path.glob("t/*.parquet"), key=lambda x: x.stat().st_mtime)[0]
    assert pq.read_schema(old_file).field("id").type == pa.int32()
    expected = [
        (1, 1.5, Decimal("1.250"), dt.datetime(2024, 1, 1)),
        (2, 2.5, Decimal("2.500"), dt.datetime(2024, 1, 2)),
        (2**40, 0.1, Decimal("123.456"), dt.datetime(2024, 1, 3, 12, 30)),
    ]
    duck = duckdb_rows(root).to_pylist()
    assert sorted((r["id"], r["f"], r["d"], r["day"]) for r in duck) == expected
    # narrower data is not cast up by a DataFrame-style write (as in the reference)
    with pytest.raises(errors.DeltaWriteError, match="DELTA_FAILED_TO_MERGE_FIELDS"):
        write_table(root, NARROW, mode="append", schema_mode="merge")
    # a second deltalog write records nothing new; deltalog's own reader widens the old file
    write_table(root, WIDE, mode="append", schema_mode="merge")
    assert len(_fields(root)["id"]["metadata"]["delta.typeChanges"]) == 1  # type: ignore[arg-type]
    ours = _deltalog_rows(root)
    assert sorted(ours) == sorted([*expected, expected[2]])
    assert len(duckdb_rows(root)) == 4


def _deltalog_rows(root: str) -> list[tuple[object, ...]]:
    snapshot = DeltaLog.for_table(root).update()
    layout = TableLayout.of(snapshot)
    rows: list[tuple[object, ...]] = []
    files = snapshot.all_files_arrow()
    for path, pv in zip(
        files.column("path").to_pylist(), files.column("partitionValues").to_pylist(), strict=True
    ):
        data = read_parquet(f"{root}/{path}", root)
        logical = to_logical(data, layout.schema, [], "none", dict(pv or []))
        rows += [(r["id"], r["f"], r["d"], r["day"]) for r in logical.to_pylist()]
    return rows


def test_preview_tables_record_the_commit_version(tmp_path: Path) -> None:
    """Tables on ``typeWidening-preview`` also get ``tableVersion`` (the commit's version), from
    a write's schema evolution and from ALTER COLUMN TYPE alike."""
    from deltalog.commands.ddl.alter_columns import ColumnChange, change_column

    root = str(tmp_path / "t")
    conf = {"delta.feature.typeWidening-preview": "supported", "delta.enableTypeWidening": "true"}
    write_table(root, NARROW.select(["id", "f"]), configuration=conf)
    features = DeltaLog.for_table(root).update().protocol.writer_features or ()
    assert "typeWidening-preview" in features and "typeWidening" not in features
    version = write_table(root, WIDE.select(["id", "f"]), mode="append", schema_mode="merge")
    assert version == 1
    fields = _fields(root)
    assert fields["id"]["metadata"] == {
        "delta.typeChanges": [{"tableVersion": 1, "fromType": "integer", "toType": "long"}]
    }
    assert fields["f"]["metadata"] == {
        "delta.typeChanges": [{"tableVersion": 1, "fromType": "float", "toType": "double"}]
    }
    other = str(tmp_path / "u")
    write_table(other, NARROW.select(["id"]), configuration=conf)
    assert change_column(other, ColumnChange(("id",), data_type=p("long"))) == 1
    assert _fields(other)["id"]["metadata"] == {
        "delta.typeChanges": [{"tableVersion": 1, "fromType": "integer", "toType": "long"}]
    }
