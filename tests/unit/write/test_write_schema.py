"""Write-side schema rules: Arrow -> Delta types, nullability, merging a data schema into a table
schema (the reference's SchemaMergingUtils / ImplicitMetadataOperation), partition-column checks
and column-mapping assignment (DeltaColumnMapping)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from deltalog.errors import DeltaWriteError, InvalidArgumentError
from deltalog.schema import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    as_nullable,
    drop_column_mapping_metadata,
    parse_schema,
    schema_from_arrow,
)
from deltalog.write.schema_evolution import (
    assign_column_mapping,
    check_partition_columns,
    column_paths,
    find_max_column_id,
    merge_schema,
)

T = "/tmp/t"


def p(name: str) -> PrimitiveType:
    return PrimitiveType(name)


def f(name: str, t: object, nullable: bool = True, **metadata: object) -> StructField:
    return StructField(name, t, nullable, dict(metadata))  # type: ignore[arg-type]


def s(*fields: StructField) -> StructType:
    return StructType(tuple(fields))


# -- schema_from_arrow -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arrow", "delta"),
    [
        (pa.int8(), p("byte")),
        (pa.int16(), p("short")),
        (pa.int32(), p("integer")),
        (pa.int64(), p("long")),
        (pa.float32(), p("float")),
        (pa.float64(), p("double")),
        (pa.string(), p("string")),
        (pa.large_string(), p("string")),
        (pa.string_view(), p("string")),
        (pa.binary(), p("binary")),
        (pa.large_binary(), p("binary")),
        (pa.bool_(), p("boolean")),
        (pa.date32(), p("date")),
        (pa.timestamp("us", tz="UTC"), p("timestamp")),
        (pa.timestamp("ns", tz="Europe/Paris"), p("timestamp")),
        (pa.timestamp("s", tz="+02:00"), p("timestamp")),
        (pa.timestamp("us"), p("timestamp_ntz")),
        (pa.timestamp("ms"), p("timestamp_ntz")),
        (pa.timestamp("ns"), p("timestamp_ntz")),
        (pa.decimal128(10, 2), DecimalType(10, 2)),
        (pa.decimal128(38, 0), DecimalType(38, 0)),
        (pa.null(), p("void")),
        (pa.dictionary(pa.int32(), pa.string()), p("string")),
        (pa.list_(pa.int32()), ArrayType(p("integer"), True)),
        (pa.large_list(pa.field("x", pa.string(), False)), ArrayType(p("string"), False)),
        (
            pa.map_(pa.string(), pa.field("value", pa.int64(), False)),
            MapType(p("string"), p("long"), False),
        ),
        (
            pa.struct([pa.field("a", pa.int64(), False), pa.field("b", pa.list_(pa.bool_()))]),
            s(f("a", p("long"), False), f("b", ArrayType(p("boolean")))),
        ),
    ],
)
def test_schema_from_arrow_types(arrow: pa.DataType, delta: object) -> None:
    schema = schema_from_arrow(pa.schema([pa.field("c", arrow)]))
    assert schema == s(f("c", delta))


def test_schema_from_arrow_keeps_field_nullability() -> None:
    schema = schema_from_arrow(pa.schema([pa.field("a", pa.int64(), False), ("b", pa.int64())]))
    assert [x.nullable for x in schema.fields] == [False, True]


@pytest.mark.parametrize(
    ("arrow", "column", "bad"),
    [
        (pa.uint8(), "c", "uint8"),
        (pa.uint64(), "c", "uint64"),
        (pa.float16(), "c", "halffloat"),
        (pa.date64(), "c", "date64[ms]"),
        (pa.time64("us"), "c", "time64[us]"),
        (pa.duration("s"), "c", "duration[s]"),
        (pa.decimal256(40, 2), "c", "decimal256(40, 2)"),
        (pa.decimal128(5, -1), "c", "decimal128(5, -1)"),
        (pa.list_(pa.uint32()), "c.element", "uint32"),
        (
            pa.struct([pa.field("inner", pa.month_day_nano_interval())]),
            "c.inner",
            "month_day_nano_interval",
        ),
        (pa.map_(pa.string(), pa.uint16()), "c.value", "uint16"),
        (pa.map_(pa.uint16(), pa.string()), "c.key", "uint16"),
    ],
)
def test_schema_from_arrow_refuses_types_without_delta_equivalent(
    arrow: pa.DataType, column: str, bad: str
) -> None:
    with pytest.raises(DeltaWriteError) as e:
        schema_from_arrow(pa.schema([pa.field("c", arrow)]), table=T)
    assert e.value.error_class == "DELTA_UNSUPPORTED_DATA_TYPE"
    assert f"Column {column} has type {bad}," in str(e.value)
    assert e.value.table == T


def test_round_trip_arrow_json_arrow() -> None:
    arrow = pa.schema(
        [
            pa.field("b", pa.int8()),
            pa.field("s", pa.int16(), False),
            pa.field("i", pa.int32()),
            pa.field("l", pa.int64()),
            pa.field("f", pa.float32()),
            pa.field("d", pa.float64()),
            pa.field("str", pa.string()),
            pa.field("bin", pa.binary()),
            pa.field("bool", pa.bool_()),
            pa.field("date", pa.date32()),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("ntz", pa.timestamp("us")),
            pa.field("dec", pa.decimal128(12, 3)),
            pa.field("void", pa.null()),
            pa.field("arr", pa.list_(pa.field("element", pa.int32(), False))),
            pa.field("m", pa.map_(pa.string(), pa.field("value", pa.struct([("x", pa.int64())])))),
            pa.field(
                "st",
                pa.struct(
                    [
                        pa.field("n", pa.list_(pa.field("element", pa.string()))),
                        pa.field("z", pa.decimal128(38, 18), False),
                    ]
                ),
            ),
        ]
    )
    delta = schema_from_arrow(arrow)
    back = parse_schema(delta.to_json()).to_arrow()
    assert back.equals(arrow), f"{back}\n!=\n{arrow}"


def test_non_canonical_arrow_types_do_not_round_trip_but_map_to_canonical() -> None:
    # ns / non-UTC / large / dictionary layouts come back in the canonical Spark layout.
    arrow = pa.schema([("ts", pa.timestamp("ns", tz="Asia/Tokyo")), ("s", pa.large_string())])
    back = parse_schema(schema_from_arrow(arrow).to_json()).to_arrow()
    assert back == pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("s", pa.string())])


# -- as_nullable / drop_column_mapping_metadata ------------------------------------------------


def test_as_nullable_recursively_and_keeps_metadata() -> None:
    schema = s(
        f("a", p("long"), False, comment="the key"),
        f("b", ArrayType(s(f("x", p("integer"), False)), False), False),
        f("c", MapType(p("string"), ArrayType(p("long"), False), False), False),
    )
    out = as_nullable(schema)
    assert out == s(
        f("a", p("long"), True, comment="the key"),
        f("b", ArrayType(s(f("x", p("integer"), True)), True), True),
        f("c", MapType(p("string"), ArrayType(p("long"), True), True), True),
    )


def test_as_nullable_is_identity_on_nullable_schemas() -> None:
    schema = s(f("a", p("long")), f("b", ArrayType(p("long"))))
    assert as_nullable(schema) == schema


def test_drop_column_mapping_metadata_everywhere_keeps_others() -> None:
    cm = {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}
    schema = s(
        StructField("a", s(StructField("x", p("long"), True, {**cm, "comment": "c"})), True, cm),
        StructField("b", p("long"), True, {"parquet.field.id": 3}),
    )
    out = drop_column_mapping_metadata(schema)
    assert out == s(f("a", s(f("x", p("long"), comment="c"))), f("b", p("long")))


# -- merge_schema ------------------------------------------------------------------------------

TABLE = s(f("id", p("long"), False), f("name", p("string"), comment="who"))


def test_same_schema_is_returned_unchanged() -> None:
    assert merge_schema(TABLE, TABLE, merge=False, table_root=T) is TABLE


def test_missing_data_columns_are_fine_without_merge() -> None:
    assert merge_schema(TABLE, s(f("ID", p("long"))), merge=False, table_root=T) is TABLE


def test_names_match_case_insensitively_and_keep_table_spelling_nullability_metadata() -> None:
    data = s(f("NAME", p("string")), f("Id", p("long")))
    assert merge_schema(TABLE, data, merge=False, table_root=T) == TABLE


def test_new_column_without_merge_is_a_schema_mismatch() -> None:
    data = s(f("id", p("long")), f("age", p("integer")))
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(TABLE, data, merge=False, table_root=T, table_id="tid-1")
    err = e.value
    assert err.error_class == "DELTA_METADATA_MISMATCH"
    text = str(err)
    assert "Table ID: tid-1" in text and "new column(s) age" in text
    assert "struct<id:long,name:string>" in text and "struct<id:long,age:integer>" in text
    assert ".option('mergeSchema', 'true')" in text
    assert "overwriteSchema" not in text


def test_overwrite_hint_suggests_overwrite_schema() -> None:
    data = s(f("id", p("long")), f("age", p("integer")))
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(TABLE, data, merge=False, table_root=T, overwrite_hint=True)
    assert e.value.error_class == "DELTA_METADATA_MISMATCH"
    assert ".option('overwriteSchema', 'true')" in str(e.value)


def test_merge_appends_new_columns_at_the_end() -> None:
    data = s(f("age", p("integer"), False), f("id", p("long")))
    merged = merge_schema(TABLE, data, merge=True, table_root=T)
    assert merged == s(*TABLE.fields, f("age", p("integer"), False))


def test_merge_appends_new_nested_fields_in_structs_arrays_and_map_values() -> None:
    table = s(
        f("st", s(f("a", p("long")))),
        f("arr", ArrayType(s(f("a", p("long"))))),
        f("m", MapType(p("string"), s(f("a", p("long"))))),
    )
    data = s(
        f("m", MapType(p("string"), s(f("b", p("string")), f("A", p("long"))))),
        f("arr", ArrayType(s(f("b", p("string"))))),
        f("st", s(f("b", p("string")))),
    )
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(table, data, merge=False, table_root=T)
    assert "new column(s) st.b, arr.element.b, m.value.b" in str(e.value)
    merged = merge_schema(table, data, merge=True, table_root=T)
    two = s(f("a", p("long")), f("b", p("string")))
    assert merged == s(f("st", two), f("arr", ArrayType(two)), f("m", MapType(p("string"), two)))


def test_new_columns_do_not_bring_column_mapping_metadata_of_their_source() -> None:
    cm = {"delta.columnMapping.id": 7, "delta.columnMapping.physicalName": "col-x"}
    data = s(StructField("new", s(StructField("x", p("long"), True, cm)), True, {**cm, "c": 1}))
    merged = merge_schema(TABLE, data, merge=True, table_root=T)
    assert merged.fields[-1] == f("new", s(f("x", p("long"))), c=1)


def test_nested_new_struct_reported_once() -> None:
    data = s(f("id", p("long")), f("new", s(f("x", p("long")), f("y", p("long")))))
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(TABLE, data, merge=False, table_root=T)
    assert "Data schema" in str(e.value) and "new column(s) new. Table schema" in str(e.value)


@pytest.mark.parametrize(
    ("table_type", "data_type", "merged"),
    [
        ("byte", "short", "short"),
        ("byte", "integer", "integer"),
        ("short", "integer", "integer"),
        ("short", "byte", "short"),
        ("integer", "byte", "integer"),
        ("integer", "short", "integer"),
        ("void", "long", "long"),
        ("string", "void", "string"),
    ],
)
def test_int32_family_and_void_merge(table_type: str, data_type: str, merged: str) -> None:
    table = s(f("c", p(table_type)))
    out = merge_schema(table, s(f("c", p(data_type))), merge=True, table_root=T)
    assert out == s(f("c", p(merged)))
    if merged == table_type:  # narrower data into a wider column: no schema change at all
        assert merge_schema(table, s(f("c", p(data_type))), merge=False, table_root=T) is table
    else:  # the column widens: that is a schema change, which needs mergeSchema
        with pytest.raises(DeltaWriteError, match="changed type"):
            merge_schema(table, s(f("c", p(data_type))), merge=False, table_root=T)


def test_void_absorbs_complex_types_both_ways() -> None:
    arr = ArrayType(p("long"))
    assert merge_schema(s(f("c", p("void"))), s(f("c", arr)), merge=True, table_root=T) == s(
        f("c", arr)
    )
    table = s(f("c", arr))
    assert merge_schema(table, s(f("c", p("void"))), merge=False, table_root=T) is table


@pytest.mark.parametrize(
    ("table_type", "data_type"),
    [
        ("integer", "long"),  # narrower data into a wider column still fails (no implicit cast)
        ("long", "integer"),
        ("float", "double"),
        ("double", "float"),
        ("string", "integer"),
        ("timestamp", "timestamp_ntz"),
        ("date", "timestamp"),
        ("boolean", "byte"),
    ],
)
def test_incompatible_types_fail_even_with_merge(table_type: str, data_type: str) -> None:
    for merge in (False, True):
        with pytest.raises(DeltaWriteError) as e:
            merge_schema(
                s(f("c", p(table_type))), s(f("C", p(data_type))), merge=merge, table_root=T
            )
        err = e.value
        assert err.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
        assert isinstance(err.__cause__, DeltaWriteError)
        assert err.__cause__.error_class == "DELTA_MERGE_INCOMPATIBLE_DATATYPE"
        assert f"table has type {table_type}, the data has type {data_type}" in str(err)
        assert err.table == T and "cast column c" in str(err)


def test_incompatible_nested_type_names_the_full_path() -> None:
    table = s(f("a", s(f("b", ArrayType(s(f("c", p("integer"))))))))
    data = s(f("a", s(f("b", ArrayType(s(f("c", p("string"))))))))
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(table, data, merge=True, table_root=T)
    assert "'a.b.element.c'" in str(e.value)
    assert e.value.__cause__.error_class == "DELTA_MERGE_INCOMPATIBLE_DATATYPE"  # type: ignore[union-attr]


def test_complex_against_primitive_is_incompatible() -> None:
    with pytest.raises(DeltaWriteError, match="array<long>"):
        merge_schema(
            s(f("c", ArrayType(p("long")))), s(f("c", p("long"))), merge=True, table_root=T
        )


@pytest.mark.parametrize(
    ("table_dec", "data_dec", "detail"),
    [
        ((10, 2), (12, 2), "precision 10 and 12"),
        ((10, 2), (10, 3), "scale 2 and 3"),
        ((10, 2), (12, 4), "precision 10 and 12 & scale 2 and 4"),
    ],
)
def test_decimals_must_match_exactly(
    table_dec: tuple[int, int], data_dec: tuple[int, int], detail: str
) -> None:
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(
            s(f("d", DecimalType(*table_dec))),
            s(f("d", DecimalType(*data_dec))),
            merge=True,
            table_root=T,
        )
    assert e.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
    cause = e.value.__cause__
    assert isinstance(cause, DeltaWriteError)
    assert cause.error_class == "DELTA_MERGE_INCOMPATIBLE_DECIMAL_TYPE"
    assert detail in str(cause) and detail in str(e.value)


def test_equal_decimals_merge() -> None:
    table = s(f("d", DecimalType(10, 2)))
    assert merge_schema(table, s(f("d", DecimalType(10, 2))), merge=False, table_root=T) is table


@pytest.mark.parametrize(
    "data",
    [
        s(f("a", p("long")), f("A", p("long"))),
        s(f("s", s(f("x", p("long")), f("X", p("string"))))),
        s(f("arr", ArrayType(s(f("x", p("long")), f("x", p("long")))))),
    ],
)
def test_duplicate_data_columns_are_refused(data: StructType) -> None:
    with pytest.raises(DeltaWriteError) as e:
        merge_schema(s(f("a", p("long"))), data, merge=True, table_root=T)
    assert e.value.error_class == "DELTA_DUPLICATE_COLUMNS_FOUND.DATA"
    assert "Found duplicate column(s) in the data being saved" in str(e.value)


def test_same_names_at_different_levels_are_not_duplicates() -> None:
    data = s(f("x", p("long")), f("s", s(f("x", p("long")))))
    assert merge_schema(data, data, merge=False, table_root=T) is data


def test_array_and_map_nullability_comes_from_the_table() -> None:
    table = s(f("a", ArrayType(s(f("x", p("long"))), False)))
    data = s(f("a", ArrayType(s(f("x", p("long")), f("y", p("long"))), True)))
    merged = merge_schema(table, data, merge=True, table_root=T)
    assert merged.fields[0].type == ArrayType(s(f("x", p("long")), f("y", p("long"))), False)


# -- check_partition_columns -------------------------------------------------------------------

DATA = s(f("id", p("long")), f("Day", p("date")), f("dec", DecimalType(5, 1)), f("v", p("string")))


def test_partition_columns_are_normalised_to_schema_spelling() -> None:
    assert check_partition_columns(DATA, ["day", "DEC"], T) == ["Day", "dec"]
    assert check_partition_columns(DATA, [], T) == []


def test_partition_column_must_exist() -> None:
    with pytest.raises(DeltaWriteError) as e:
        check_partition_columns(DATA, ["nope"], T)
    assert e.value.error_class == "DELTA_PARTITION_COLUMN_NOT_FOUND"
    assert "Partition column nope not found in schema [id, Day, dec, v]" in str(e.value)


def test_nested_field_is_not_a_partition_column() -> None:
    with pytest.raises(DeltaWriteError, match="DELTA_PARTITION_COLUMN_NOT_FOUND"):
        check_partition_columns(s(f("s", s(f("x", p("long")))), f("y", p("long"))), ["s.x"], T)


def test_duplicate_partition_columns() -> None:
    with pytest.raises(DeltaWriteError) as e:
        check_partition_columns(DATA, ["day", "Day"], T)
    assert e.value.error_class == "DELTA_DUPLICATE_COLUMNS_FOUND.PARTITION_COLUMNS"


def test_ambiguous_partition_column() -> None:
    with pytest.raises(DeltaWriteError) as e:
        check_partition_columns(
            s(f("a", p("long")), f("A", p("long")), f("b", p("long"))), ["a"], T
        )
    assert e.value.error_class == "DELTA_AMBIGUOUS_PARTITION_COLUMN"


def test_all_columns_as_partitions() -> None:
    schema = s(f("a", p("long")), f("b", p("string")))
    with pytest.raises(DeltaWriteError) as e:
        check_partition_columns(schema, ["a", "b"], T)
    assert e.value.error_class == "DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION"
    with pytest.raises(DeltaWriteError) as e:
        check_partition_columns(schema, ["b", "a"], T, data=True)
    assert e.value.error_class == "DELTA_NON_PARTITION_COLUMN_ABSENT"
    assert check_partition_columns(schema, ["a"], T) == ["a"]


@pytest.mark.parametrize(
    "t",
    [
        s(f("x", p("long"))),
        ArrayType(p("long")),
        MapType(p("string"), p("long")),
        p("void"),
        p("variant"),
    ],
)
def test_complex_and_unorderable_partition_types_are_refused(t: object) -> None:
    with pytest.raises(DeltaWriteError) as e:
        check_partition_columns(s(f("p", t), f("v", p("long"))), ["p"], T)
    assert e.value.error_class == "DELTA_INVALID_PARTITION_COLUMN_TYPE"
    assert "Using column p of type" in str(e.value)


@pytest.mark.parametrize(
    "name", ["string", "long", "date", "timestamp", "timestamp_ntz", "boolean", "binary"]
)
def test_primitive_partition_types_are_fine(name: str) -> None:
    assert check_partition_columns(s(f("p", p(name)), f("v", p("long"))), ["p"], T) == ["p"]


# -- column mapping ----------------------------------------------------------------------------

NESTED = s(
    f("a", p("long")),
    f("s", s(f("x", p("long")), f("y", ArrayType(s(f("z", p("long"))))))),
    f("m", MapType(s(f("k", p("string"))), s(f("v", p("long"))))),
)
PHYSICAL = re.compile(r"^col-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _ids(schema: StructType) -> dict[str, int]:
    from deltalog.schema import explode

    return {".".join(p_): fl.metadata["delta.columnMapping.id"] for p_, fl in explode(schema)}


def test_assign_column_mapping_numbers_parents_before_children() -> None:
    out, max_id = assign_column_mapping(NESTED, "name", 0)
    assert _ids(out) == {
        "a": 1,
        "s": 2,
        "s.x": 3,
        "s.y": 4,
        "s.y.element.z": 5,
        "m": 6,
        "m.key.k": 7,
        "m.value.v": 8,
    }
    assert max_id == 8
    from deltalog.schema import explode

    names = [fl.metadata["delta.columnMapping.physicalName"] for _, fl in explode(out)]
    assert all(PHYSICAL.match(n) for n in names) and len(set(names)) == len(names)
    assert list(column_paths(out)) == list(column_paths(NESTED))


def test_assign_column_mapping_id_mode_is_the_same_assignment() -> None:
    out, max_id = assign_column_mapping(NESTED, "ID", 10)
    assert max_id == 18 and _ids(out)["a"] == 11


def test_assign_column_mapping_keeps_existing_and_continues_from_max() -> None:
    first, max_id = assign_column_mapping(s(f("a", p("long")), f("b", p("long"))), "name", 0)
    evolved = s(*first.fields, f("c", s(f("d", p("long")))))
    out, new_max = assign_column_mapping(evolved, "name", max_id)
    assert out.fields[:2] == first.fields
    assert _ids(out) == {"a": 1, "b": 2, "c": 3, "c.d": 4} and new_max == 4
    # a stale maxColumnId below the schema's ids is ignored; a larger one is honoured.
    assert assign_column_mapping(evolved, "name", 0)[1] == 4
    assert assign_column_mapping(evolved, "name", 40)[1] == 42
    assert find_max_column_id(out) == 4


def test_assign_column_mapping_mode_none_is_a_no_op() -> None:
    assert assign_column_mapping(NESTED, "none", 7) == (NESTED, 7)


def test_assign_column_mapping_refuses_unknown_mode() -> None:
    with pytest.raises(InvalidArgumentError):
        assign_column_mapping(NESTED, "position", 0)


def test_assigned_schema_round_trips_through_json() -> None:
    out, _ = assign_column_mapping(NESTED, "name", 0)
    assert parse_schema(out.to_json()) == out
    assert drop_column_mapping_metadata(out) == NESTED
