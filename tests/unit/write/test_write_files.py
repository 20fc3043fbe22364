"""Data files written by deltalog.write, read back by deltalake, DuckDB's delta extension (kernel)
and deltalog's own reader. Expected rows come from the inputs, never from deltalog."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import DeltaLog, errors, paths
from deltalog.actions import AddFile
from deltalog.data_files import read_parquet, to_logical
from deltalog.partition_values import parse_partition_value
from deltalog.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
)
from deltalog.storage import LocalLogStore
from deltalog.write import (
    DataFileWriter,
    WriteLayout,
    directory_value,
    encode_log_path,
    escape_path_name,
    partition_directory,
    serialize_partition_value,
)
from deltalog.write.partitioning import java_double_string
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

UTC = dt.UTC
LONG = PrimitiveType("long")
INT = PrimitiveType("integer")
STRING = PrimitiveType("string")
DATE = PrimitiveType("date")
TS = PrimitiveType("timestamp")
TS_NTZ = PrimitiveType("timestamp_ntz")
BOOL = PrimitiveType("boolean")
DOUBLE = PrimitiveType("double")


def schema_of(*fields: tuple[str, DataType]) -> StructType:
    return StructType(tuple(StructField(name, t) for name, t in fields))


# -- a table: files by DataFileWriter, the log by hand --------------------------------------------


def commit(
    root: Path,
    schema: StructType,
    partition_columns: Sequence[str],
    adds: Sequence[AddFile],
    *,
    protocol: tuple[int, int] = (1, 2),
    features: Sequence[str] | None = None,
    configuration: dict[str, str] | None = None,
) -> None:
    """Write commit 0 of a table holding ``adds``."""
    proto: dict[str, Any] = {"minReaderVersion": protocol[0], "minWriterVersion": protocol[1]}
    if features is not None:
        proto["readerFeatures"] = list(features)
        proto["writerFeatures"] = list(features)
    meta = {
        "id": "00000000-0000-0000-0000-000000000000",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema.to_json(),
        "partitionColumns": list(partition_columns),
        "configuration": configuration or {},
        "createdTime": 0,
    }
    lines = [json.dumps({"protocol": proto}), json.dumps({"metaData": meta})]
    lines += [a.to_json() for a in adds]
    (root / "_delta_log").mkdir(parents=True, exist_ok=True)
    (root / "_delta_log" / "00000000000000000000.json").write_text(
        "\n".join(lines) + "\n", encoding="utf-8"
    )


def write_table(
    root: Path,
    schema: StructType,
    data: pa.Table | list[pa.RecordBatch],
    partition_columns: Sequence[str] = (),
    *,
    protocol: tuple[int, int] = (1, 2),
    features: Sequence[str] | None = None,
    configuration: dict[str, str] | None = None,
    **layout_options: Any,
) -> list[AddFile]:
    configuration = configuration or {}
    layout = WriteLayout(
        str(root),
        schema,
        tuple(partition_columns),
        configuration.get("delta.columnMapping.mode", "none"),
        configuration,
        **layout_options,
    )
    adds = DataFileWriter(LocalLogStore(), layout).write(data)
    commit(
        root,
        schema,
        partition_columns,
        adds,
        protocol=protocol,
        features=features,
        configuration=configuration,
    )
    return adds


def expected_rows(
    rows: list[dict[str, Any]], schema: StructType, partition_columns: Sequence[str] = ()
) -> pa.Table:
    """The rows a reader must return: the inputs, with "" in a string partition column null."""
    out = []
    for r in rows:
        row = {f.name: r.get(f.name) for f in schema.fields}
        for c in partition_columns:
            if row[c] == "":
                row[c] = None
        out.append(row)
    return pa.Table.from_pylist(out, schema=schema.to_arrow())


def deltalog_rows(root: Path) -> pa.Table:
    """Rows through deltalog's own reader: the snapshot's files, read and made logical."""
    snapshot = DeltaLog.for_table(str(root)).update()
    parts = []
    for f in snapshot.all_files_arrow().to_pylist():
        data = read_parquet(paths.resolve(str(root), f["path"]), str(root))
        parts.append(
            to_logical(
                data,
                snapshot.schema,
                snapshot.partition_columns,
                snapshot.column_mapping_mode,
                dict(f["partitionValues"]),
            )
        )
    return pa.concat_tables(parts) if parts else snapshot.schema.to_arrow().empty_table()


def assert_readers_agree(root: Path, expected: pa.Table, *, duckdb: bool = True) -> None:
    want = canonical(expected)
    assert canonical(oracle_rows(str(root))) == want
    if duckdb:
        assert canonical(duckdb_rows(str(root))) == want
    assert canonical(deltalog_rows(root)) == want


def stats_of(add: AddFile) -> dict[str, Any]:
    assert add.stats is not None
    result: dict[str, Any] = json.loads(add.stats, parse_float=decimal.Decimal)
    return result


# -- partition values ----------------------------------------------------------------------------

ROUND_TRIP = [
    ("abc", STRING),
    ("a b/c:d=e%f", STRING),
    ("null", STRING),
    ("ünï©ødé ☃", STRING),
    (0, LONG),
    (-(2**63), LONG),
    (2**31 - 1, INT),
    (-5, PrimitiveType("short")),
    (7, PrimitiveType("byte")),
    (True, BOOL),
    (False, BOOL),
    (1.5, DOUBLE),
    (-0.0, DOUBLE),
    (1e-300, DOUBLE),
    (12345678.9, DOUBLE),
    (float("inf"), DOUBLE),
    (0.10000000149011612, PrimitiveType("float")),
    (decimal.Decimal("234.00000"), DecimalType(12, 5)),
    (decimal.Decimal("-0.01"), DecimalType(5, 2)),
    (decimal.Decimal("1234567890123456789012345.678"), DecimalType(38, 3)),
    (decimal.Decimal("12345678901234567890123456789012345678"), DecimalType(38, 0)),
    (dt.date(2024, 2, 29), DATE),
    (dt.date(1, 1, 1), DATE),
    (dt.datetime(2024, 1, 1, 18, 0, tzinfo=UTC), TS),
    (dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), TS),
    (dt.datetime(2024, 1, 1, 10, 0, 0, 120000), TS_NTZ),
    (b"bytes", PrimitiveType("binary")),
]


@pytest.mark.parametrize(("value", "data_type"), ROUND_TRIP)
def test_partition_value_round_trips(value: Any, data_type: DataType) -> None:
    text = serialize_partition_value(value, data_type)
    assert text is not None
    back = parse_partition_value(text, data_type)
    if data_type == PrimitiveType("float"):  # parsed as a double, read as the column's float32
        back = pa.scalar(back, pa.float32()).as_py()
    assert back == value
    if isinstance(value, float):
        assert str(back) == str(value)  # keeps -0.0 and inf


@pytest.mark.parametrize(
    ("value", "data_type", "text"),
    [
        (None, LONG, None),
        ("", STRING, None),
        (dt.datetime(2024, 1, 1, 18, 0, tzinfo=UTC), TS, "2024-01-01T18:00:00.000000Z"),
        (
            dt.datetime(2024, 1, 1, 10, 0, tzinfo=dt.timezone(dt.timedelta(hours=-8))),
            TS,
            "2024-01-01T18:00:00.000000Z",
        ),
        (dt.datetime(2024, 1, 1, 18, 0, 0, 5), TS, "2024-01-01T18:00:00.000005Z"),
        (dt.datetime(2024, 1, 1, 10, 0), TS_NTZ, "2024-01-01 10:00:00"),
        # Years before 1000 keep four digits (glibc's strftime would write "1-01-01").
        (dt.datetime(1, 1, 1, tzinfo=dt.UTC), TS, "0001-01-01T00:00:00.000000Z"),
        (dt.datetime(999, 12, 31, 23, 59, 59, 5), TS_NTZ, "0999-12-31 23:59:59.000005"),
        (dt.date(1, 1, 1), DATE, "0001-01-01"),
        (dt.datetime(2024, 1, 1, 10, 0, 0, 120000), TS_NTZ, "2024-01-01 10:00:00.12"),
        (dt.date(2024, 3, 5), DATE, "2024-03-05"),
        (decimal.Decimal("234"), DecimalType(12, 5), "234.00000"),
        (decimal.Decimal("1E+3"), DecimalType(6, 2), "1000.00"),
        (
            decimal.Decimal("12345678901234567890123456789012345678"),
            DecimalType(38, 0),
            "12345678901234567890123456789012345678",
        ),
        (True, BOOL, "true"),
        (1.0, DOUBLE, "1.0"),
        (1e10, DOUBLE, "1.0E10"),
        (0.001, DOUBLE, "0.001"),
        (0.0001, DOUBLE, "1.0E-4"),
        (float("nan"), DOUBLE, "NaN"),
        (float("-inf"), DOUBLE, "-Infinity"),
        (42, LONG, "42"),
    ],
)
def test_partition_value_text(value: Any, data_type: DataType, text: str | None) -> None:
    assert serialize_partition_value(value, data_type) == text


def test_java_double_string_matches_java() -> None:
    cases = {
        123.0: "123.0",
        -1.25: "-1.25",
        9999999.0: "9999999.0",
        1e7: "1.0E7",
        1.2345e-5: "1.2345E-5",
        0.1: "0.1",
        1e21: "1.0E21",
        123456789.123: "1.23456789123E8",
    }
    for value, text in cases.items():
        assert java_double_string(value) == text
    assert java_double_string(0.1, single=True) == "0.1"  # Float.toString(0.1f)


def test_binary_partition_value_must_be_utf8() -> None:
    with pytest.raises(errors.InvalidArgumentError):
        serialize_partition_value(b"\xff\xfe", PrimitiveType("binary"))


def test_timestamp_directory_uses_session_zone() -> None:
    value = dt.datetime(2024, 1, 1, 18, 0, 0, 500000, tzinfo=UTC)
    assert directory_value(value, TS) == "2024-01-01 18:00:00.5"
    assert directory_value(value, TS, time_zone="America/Los_Angeles") == "2024-01-01 10:00:00.5"
    assert serialize_partition_value(value, TS) == "2024-01-01T18:00:00.500000Z"


def test_hive_escaping_and_log_path() -> None:
    assert escape_path_name("a b:c=d/e%f#g?h*i'j\"k\\l{m[n]o^p\x01q\x7fr") == (
        "a b%3Ac%3Dd%2Fe%25f%23g%3Fh%2Ai%27j%22k%5Cl%7Bm%5Bn%5Do%5Ep%01q%7Fr"
    )
    assert escape_path_name("ünï+~!@$&()") == "ünï+~!@$&()"
    directory = partition_directory([("c:1", "2024-01-01 10:00:00"), ("b", None), ("e", "")])
    assert directory == "c%3A1=2024-01-01 10%3A00%3A00/b=__HIVE_DEFAULT_PARTITION__/" + (
        "e=__HIVE_DEFAULT_PARTITION__"
    )
    relative = directory + "/part-00000-x.c000.snappy.parquet"
    encoded = encode_log_path(relative)
    assert encoded.startswith("c%253A1=2024-01-01%2010%253A00%253A00/b=__HIVE")
    assert paths.resolve("/root", encoded) == "/root/" + relative
    nasty = "p=a+b ü#[x]/f.parquet"
    assert encode_log_path(nasty) == "p=a+b%20ü%23%5Bx%5D/f.parquet"
    assert paths.resolve("/r", encode_log_path(nasty)) == "/r/" + nasty


# -- tables read back by the oracles ---------------------------------------------------------------

NASTY = [
    "plain",
    "a b",
    "100%",
    "x=y",
    "a/b",
    "c:d",
    "ünï©ødé ☃",
    None,
    "",
    "null",
    "#?*'\"\\",
    "[]{}^",
    "tab\there",
    "+plus+",
    "%3A",
    "__HIVE_DEFAULT_PARTITION__x",
]


def test_nasty_string_partitions(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("p", STRING))
    rows = [{"id": i, "p": p} for i, p in enumerate(NASTY)] + [{"id": 100, "p": "a b"}]
    adds = write_table(tmp_path, schema, pa.Table.from_pylist(rows), ["p"])
    # "" and null share the default partition; every other value has its own folder.
    assert len(adds) == len(NASTY) - 1
    assert {a.partition_values["p"] for a in adds} == {p or None for p in NASTY}
    for add in adds:
        relative = paths.resolve(str(tmp_path), add.path)[len(str(tmp_path)) + 1 :]
        folder = relative.split("/")[0]
        value = add.partition_values["p"]
        assert folder == "p=" + (escape_path_name(value) if value else "__HIVE_DEFAULT_PARTITION__")
        assert os.path.exists(os.path.join(tmp_path, relative))
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["p"]))


def test_typed_multi_level_partitions(tmp_path: Path) -> None:
    schema = schema_of(
        ("id", LONG),
        ("i", INT),
        ("d", DATE),
        ("ts", TS),
        ("dec", DecimalType(10, 3)),
        ("b", BOOL),
        ("v", STRING),
    )
    parts = ["i", "d", "ts", "dec", "b"]
    ts = [
        dt.datetime(2024, 1, 1, 18, 0, tzinfo=UTC),
        dt.datetime(2024, 1, 1, 18, 0, 0, 123456, tzinfo=UTC),
        None,
    ]
    rows = []
    for n in range(24):
        rows.append(
            {
                "id": n,
                "i": [1, -2, None][n % 3],
                "d": [dt.date(2024, 1, 1), None][n % 2],
                "ts": ts[n % 3],
                "dec": [decimal.Decimal("1.500"), decimal.Decimal("-0.001"), None][n % 3],
                "b": [True, False, None][(n // 3) % 3],
                "v": f"v{n}",
            }
        )
    table = pa.Table.from_pylist(rows, schema=schema.to_arrow())
    adds = write_table(tmp_path, schema, table, parts)
    assert sum(stats_of(a)["numRecords"] for a in adds) == len(rows)
    sample = next(
        a for a in adds if a.partition_values["ts"] and "123456" in a.partition_values["ts"]
    )
    assert sample.partition_values["ts"] == "2024-01-01T18:00:00.123456Z"
    folders = paths.resolve(str(tmp_path), sample.path)[len(str(tmp_path)) + 1 :].split("/")[:-1]
    assert [f.split("=")[0] for f in folders] == parts
    assert folders[2] == "ts=2024-01-01 18%3A00%3A00.123456"
    for add in adds:  # partition columns are not in the files
        names = pq.read_schema(paths.resolve(str(tmp_path), add.path)).names
        assert names == ["id", "v"]
    assert_readers_agree(tmp_path, expected_rows(rows, schema, parts))


NESTED = schema_of(
    ("id", LONG),
    (
        "s",
        StructType(
            (
                StructField("a", INT),
                StructField("inner", StructType((StructField("x", STRING),))),
                StructField("tags", ArrayType(STRING)),
            )
        ),
    ),
    ("arr", ArrayType(StructType((StructField("k", LONG), StructField("w", DOUBLE))))),
    ("m", MapType(STRING, ArrayType(INT))),
    ("p", STRING),
)


def nested_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": 1,
            "s": {"a": 1, "inner": {"x": "hello"}, "tags": ["t1", None]},
            "arr": [{"k": 1, "w": 0.5}, None],
            "m": [("a", [1, 2]), ("b", None)],
            "p": "x",
        },
        {"id": 2, "s": None, "arr": None, "m": None, "p": "x"},
        {"id": 3, "s": {"a": None, "inner": None, "tags": []}, "arr": [], "m": [], "p": "y"},
        {
            "id": 4,
            "s": {"a": 7, "inner": {"x": None}, "tags": None},
            "arr": [{"k": None, "w": None}],
            "m": [("z", [])],
            "p": "y",
        },
    ]


def test_nested_data(tmp_path: Path) -> None:
    rows = nested_rows()
    adds = write_table(
        tmp_path, NESTED, pa.Table.from_pylist(rows, schema=NESTED.to_arrow()), ["p"]
    )
    by_part = {a.partition_values["p"]: stats_of(a) for a in adds}
    assert by_part["x"]["nullCount"] == {
        "id": 0,
        "s": {"a": 1, "inner": {"x": 1}, "tags": 1},  # a null struct makes its leaves null
        "arr": 1,
        "m": 1,
    }
    assert by_part["x"]["minValues"] == {"id": 1, "s": {"a": 1, "inner": {"x": "hello"}}}
    assert by_part["y"]["maxValues"] == {"id": 4, "s": {"a": 7, "inner": {}}}
    assert_readers_agree(tmp_path, expected_rows(rows, NESTED, ["p"]))


def test_timestamp_ntz(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("t", TS_NTZ), ("pt", TS_NTZ))
    moments = [dt.datetime(2024, 1, 1, 10, 0), dt.datetime(2024, 1, 1, 10, 0, 0, 120000), None]
    rows = [{"id": n, "t": moments[n % 3], "pt": moments[(n + 1) % 3]} for n in range(9)]
    adds = write_table(
        tmp_path,
        schema,
        pa.Table.from_pylist(rows, schema=schema.to_arrow()),
        ["pt"],
        protocol=(3, 7),
        features=["timestampNtz"],
    )
    assert {a.partition_values["pt"] for a in adds} == {
        "2024-01-01 10:00:00",
        "2024-01-01 10:00:00.12",
        None,
    }
    for add in adds:
        parquet = pq.ParquetFile(paths.resolve(str(tmp_path), add.path))
        logical = parquet.schema.column(1).logical_type
        assert logical.type == "TIMESTAMP"
        assert json.loads(logical.to_json())["isAdjustedToUTC"] is False
        assert parquet.schema.column(1).physical_type == "INT64"
    stats = [stats_of(a) for a in adds]
    assert {s["maxValues"].get("t") for s in stats} >= {"2024-01-01T10:00:00.120"}
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["pt"]))


def mapped_schema() -> StructType:
    def field(name: str, t: DataType, column_id: int) -> StructField:
        meta = {
            "delta.columnMapping.id": column_id,
            "delta.columnMapping.physicalName": f"col-{column_id:04d}-{name}",
        }
        return StructField(name, t, True, meta)

    inner = StructType((field("a", LONG, 3), field("b", STRING, 4)))
    return StructType(
        (
            field("id", LONG, 1),
            field("s", inner, 2),
            field("ts", TS, 5),
            field("part", STRING, 6),
            field("tags", ArrayType(STRING), 7),
        )
    )


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping(tmp_path: Path, mode: str) -> None:
    schema = mapped_schema()
    rows = [
        {
            "id": n,
            "s": None if n == 3 else {"a": n * 10, "b": f"b{n}"},
            "ts": dt.datetime(2024, 5, n + 1, 1, 2, 3, 456789, tzinfo=UTC),
            "part": ["p 1", "p:2", None][n % 3],
            "tags": [f"t{n}"],
        }
        for n in range(6)
    ]
    configuration = {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "7"}
    adds = write_table(
        tmp_path,
        schema,
        pa.Table.from_pylist(rows, schema=schema.to_arrow()),
        ["part"],
        protocol=(2, 5),
        configuration=configuration,
    )
    for add in adds:
        assert list(add.partition_values) == ["col-0006-part"]
        assert re.fullmatch(
            r"[0-9A-Za-z]{2}/part-00000-[0-9a-f-]{36}\.c000\.snappy\.parquet", add.path
        )
        parquet_schema = pq.read_schema(paths.resolve(str(tmp_path), add.path))
        assert parquet_schema.names == ["col-0001-id", "col-0002-s", "col-0005-ts", "col-0007-tags"]
        assert parquet_schema.field("col-0002-s").metadata == {b"PARQUET:field_id": b"2"}
        nested = parquet_schema.field("col-0002-s").type.field("col-0004-b")
        assert nested.metadata == {b"PARQUET:field_id": b"4"}
        stats = stats_of(add)
        assert set(stats["nullCount"]) == {
            "col-0001-id",
            "col-0002-s",
            "col-0005-ts",
            "col-0007-tags",
        }
        assert set(stats["nullCount"]["col-0002-s"]) == {"col-0003-a", "col-0004-b"}
    expected = expected_rows(rows, schema, ["part"])
    assert canonical(oracle_rows(str(tmp_path))) == canonical(expected)
    assert canonical(deltalog_rows(tmp_path)) == canonical(expected)
    # DuckDB's delta 1.5.5 reads a column-mapped partition column that is not the schema's first
    # as null, on delta-spark's own tables too (golden data-reader-timestamp_ntz-name-mode), so
    # it checks the data columns (physical names, field ids) here.
    duck = duckdb_rows(str(tmp_path))
    assert canonical(duck.drop_columns(["part"])) == canonical(expected.drop_columns(["part"]))


def test_random_prefixes_without_column_mapping(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("p", STRING))
    rows = [{"id": n, "p": f"v{n % 2}"} for n in range(4)]
    configuration = {"delta.randomizeFilePrefixes": "true", "delta.randomPrefixLength": "5"}
    adds = write_table(
        tmp_path, schema, pa.Table.from_pylist(rows), ["p"], configuration=configuration
    )
    for add in adds:
        assert re.fullmatch(r"[0-9A-Za-z]{5}/part-.*\.parquet", add.path)
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["p"]))


def test_rolling_by_max_records(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("p", STRING))
    rows = [{"id": n, "p": "a" if n < 25 else "b"} for n in range(30)]
    batches = pa.Table.from_pylist(rows, schema=schema.to_arrow()).to_batches(max_chunksize=7)
    adds = write_table(tmp_path, schema, batches, ["p"], max_records_per_file=10)
    per_part: dict[str | None, list[AddFile]] = {}
    for add in adds:
        per_part.setdefault(add.partition_values["p"], []).append(add)
    assert [stats_of(a)["numRecords"] for a in per_part["a"]] == [10, 10, 5]
    assert [stats_of(a)["numRecords"] for a in per_part["b"]] == [5]
    assert [re.search(r"\.c(\d{3})\.", a.path).group(1) for a in per_part["a"]] == [  # type: ignore[union-attr]
        "000",
        "001",
        "002",
    ]
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["p"]))


def test_rolling_by_target_size(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("s", STRING))
    rows = [{"id": n, "s": f"{n:08d}" * 8} for n in range(20000)]
    table = pa.Table.from_pylist(rows, schema=schema.to_arrow())
    adds = write_table(
        tmp_path,
        schema,
        table.to_batches(max_chunksize=1000),
        target_file_size=200_000,
        compression="uncompressed",
    )
    assert len(adds) > 3
    assert all(a.path.endswith(".parquet") and ".c00" in a.path for a in adds)
    assert all(a.size < 2 * 200_000 for a in adds)
    assert sum(stats_of(a)["numRecords"] for a in adds) == len(rows)
    assert_readers_agree(tmp_path, expected_rows(rows, schema), duckdb=False)


@pytest.mark.parametrize("parts", [40, 12], ids=["sorted", "scanned"])
def test_many_partitions_split_and_written_on_threads(tmp_path: Path, parts: int) -> None:
    # Enough rows that partitions are gathered, flushed under memory pressure and finished on
    # threads, with files rolling over inside each partition: every row lands once, in its
    # partition, each partition's files numbered in order.
    schema = schema_of(("id", LONG), ("s", STRING), ("p", INT), ("q", STRING))
    n = 120_000
    rows = [{"id": i, "s": f"{i:012d}", "p": i % parts, "q": "ab"[i % 2]} for i in range(n)]
    table = pa.Table.from_pylist(rows, schema=schema.to_arrow())
    layout = WriteLayout(str(tmp_path), schema, ("p", "q"), "none", {}, target_file_size=15_000)
    writer = DataFileWriter(LocalLogStore(), layout, buffer_bytes=1 << 20)
    adds = writer.write(table.to_batches(max_chunksize=70_000))
    commit(tmp_path, schema, ["p", "q"], adds)
    counts: dict[tuple[str | None, ...], int] = {}
    numbers: dict[tuple[str | None, ...], list[int]] = {}
    for add in adds:
        key = (add.partition_values["p"], add.partition_values["q"])
        counts[key] = counts.get(key, 0) + stats_of(add)["numRecords"]
        number = re.search(r"\.c(\d{3})\.", add.path)
        assert number is not None
        numbers.setdefault(key, []).append(int(number.group(1)))
    expected: dict[tuple[str | None, ...], int] = {}
    for r in rows:
        key = (str(r["p"]), r["q"])
        expected[key] = expected.get(key, 0) + 1
    assert counts == expected
    assert all(found == sorted(found) for found in numbers.values())
    assert max(len(found) for found in numbers.values()) > 1  # files rolled over
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["p", "q"]), duckdb=False)


@pytest.mark.parametrize("layout", ["clustered", "scanned", "sorted", "two columns", "shared key"])
def test_partition_split_keeps_each_partitions_rows_in_input_order(
    tmp_path: Path, layout: str
) -> None:
    # Each way of finding a partition's rows (slices of clustered input, a scan of the ids per
    # partition, one sort for many partitions or several columns) writes each partition's rows
    # in input order; values whose log text is the same (NaN and -NaN) share one partition.
    # Gathered and written on threads from 64k rows.
    n = 100_000
    nan, minus_nan = float("nan"), -float("nan")
    keys: dict[str, Any] = {
        "clustered": lambda i: (i * 7 // n, 0),
        "scanned": lambda i: ((i * 7919) % 13, 0),
        "sorted": lambda i: ((i * 7919) % 97, 0),
        "two columns": lambda i: (i % 5, (i // 3) % 4),
        "shared key": lambda i: ([nan, minus_nan, 1.5][i % 3], 0),
    }
    p_type = DOUBLE if layout == "shared key" else INT
    schema = schema_of(("id", LONG), ("s", STRING), ("p", p_type), ("q", INT))
    rows = []
    for i in range(n):
        p, q = keys[layout](i)
        rows.append({"id": i, "s": f"v{(i * 31) % 1000}", "p": p, "q": q})
    table = pa.Table.from_pylist(rows, schema=schema.to_arrow())
    by = ["p", "q"] if layout == "two columns" else ["p"]
    layout_ = WriteLayout(str(tmp_path), schema, tuple(by))
    # A small buffer: partitions are written as soon as they are gathered, on threads.
    adds = DataFileWriter(LocalLogStore(), layout_, buffer_bytes=256 << 10).write(table)
    commit(tmp_path, schema, by, adds)
    expected: dict[tuple[str | None, ...], list[int]] = {}
    for r in rows:
        key = tuple(serialize_partition_value(r[c], schema.field(c).type) for c in by)
        expected.setdefault(key, []).append(r["id"])
    found: dict[tuple[str | None, ...], list[int]] = {}
    for add in adds:
        key = tuple(add.partition_values[c] for c in by)
        ids = pq.read_table(paths.resolve(str(tmp_path), add.path)).column("id").to_pylist()
        found.setdefault(key, []).extend(ids)
        assert stats_of(add)["minValues"]["id"] == min(ids)
    if layout == "shared key":  # one partition, fed by each value's rows in turn
        assert set(found) == {("NaN",), ("1.5",)}
        found = {key: sorted(ids) for key, ids in found.items()}
    assert found == expected
    assert_readers_agree(tmp_path, expected_rows(rows, schema, by), duckdb=False)


# -- the writer's contract -----------------------------------------------------------------------


def test_input_by_logical_name_any_order_missing_nullable_and_cast(tmp_path: Path) -> None:
    schema = StructType(
        (
            StructField("id", INT, nullable=False),
            StructField("s", StructType((StructField("a", LONG), StructField("b", STRING)))),
            StructField("opt", STRING),
            StructField("ts", TS),
        )
    )
    data = pa.table(
        {
            "TS": pa.array([0, 1_000_000_000], pa.timestamp("ns")),
            "s": pa.array(
                [{"b": "x", "a": 1}, None], pa.struct([("b", pa.string()), ("a", pa.int8())])
            ),
            "id": pa.array([1, 2], pa.int64()),
        }
    )
    adds = write_table(tmp_path, schema, data)
    rows = [
        {"id": 1, "s": {"a": 1, "b": "x"}, "opt": None, "ts": dt.datetime(1970, 1, 1, tzinfo=UTC)},
        {"id": 2, "s": None, "opt": None, "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)},
    ]
    assert stats_of(adds[0])["nullCount"]["opt"] == 2
    assert_readers_agree(tmp_path, expected_rows(rows, schema))
    parquet = pq.ParquetFile(paths.resolve(str(tmp_path), adds[0].path))
    ts_column = next(
        parquet.schema.column(i)
        for i in range(len(parquet.schema))
        if parquet.schema.column(i).path == "ts"
    )
    assert ts_column.physical_type == "INT64"
    assert json.loads(ts_column.logical_type.to_json())["isAdjustedToUTC"] is True

    layout = WriteLayout(str(tmp_path / "other"), schema)
    with pytest.raises(errors.InvalidArgumentError, match="not in the table schema"):
        DataFileWriter(LocalLogStore(), layout).write(pa.table({"id": [1], "zzz": [1]}))
    with pytest.raises(errors.InvalidArgumentError, match="non-nullable column id"):
        DataFileWriter(LocalLogStore(), layout).write(pa.table({"opt": ["x"]}))
    with pytest.raises(errors.InvalidArgumentError, match="does not cast"):
        DataFileWriter(LocalLogStore(), layout).write(pa.table({"id": ["not a number"]}))


def test_streaming_add_then_finish_and_empty_input(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("p", INT))
    layout = WriteLayout(str(tmp_path), schema, ("p",), data_change=False)
    writer = DataFileWriter(LocalLogStore(), layout, task_id=42, buffer_bytes=1)
    rows = []
    for b in range(5):
        batch = [{"id": b * 10 + i, "p": i % 2} for i in range(10)]
        rows += batch
        writer.add(pa.RecordBatch.from_pylist(batch, schema=schema.to_arrow()))
    writer.add(pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.int32())}))
    adds = writer.finish()
    assert len(adds) == 2  # one file per partition, row groups added as batches came
    assert all(a.path.split("/")[1].startswith("part-00042-") for a in adds)
    assert all(a.data_change is False for a in adds)
    for add in adds:
        assert pq.ParquetFile(paths.resolve(str(tmp_path), add.path)).num_row_groups == 5
    commit(tmp_path, schema, ["p"], adds)
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["p"]))

    empty = WriteLayout(str(tmp_path / "e"), schema)
    assert DataFileWriter(LocalLogStore(), empty).write([]) == []
    no_rows = pa.table({"id": pa.array([], pa.int64())})
    assert DataFileWriter(LocalLogStore(), empty).write(no_rows) == []
    assert not (tmp_path / "e").exists()


def test_abort_deletes_written_files(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG))
    layout = WriteLayout(str(tmp_path), schema, max_records_per_file=2)
    with pytest.raises(RuntimeError), DataFileWriter(LocalLogStore(), layout) as writer:
        writer.add(pa.table({"id": [1, 2, 3, 4, 5]}))
        raise RuntimeError("task failed")
    assert list(tmp_path.rglob("*.parquet")) == []


def test_layout_pickles_and_validates(tmp_path: Path) -> None:
    layout = WriteLayout(str(tmp_path), mapped_schema(), ("part",), "name", {"a": "b"})
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert layout.random_prefix_length == 2
    with pytest.raises(errors.InvalidArgumentError):
        WriteLayout(str(tmp_path), mapped_schema(), ("nope",))
    with pytest.raises(errors.InvalidArgumentError):
        WriteLayout(str(tmp_path), mapped_schema(), compression="lzo-9000")


def test_compression_codecs_name_files(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG))
    for codec, suffix in [("zstd", ".c000.zstd.parquet"), ("uncompressed", ".c000.parquet")]:
        root = tmp_path / codec
        adds = write_table(root, schema, pa.table({"id": [1, 2]}), compression=codec)
        assert adds[0].path.endswith(suffix)
        assert_readers_agree(root, expected_rows([{"id": 1}, {"id": 2}], schema), duckdb=False)


def test_void_columns_are_not_written(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("nothing", PrimitiveType("void")))
    layout = WriteLayout(str(tmp_path), schema)
    (add,) = DataFileWriter(LocalLogStore(), layout).write(pa.table({"id": [1, 2]}))
    assert pq.read_schema(paths.resolve(str(tmp_path), add.path)).names == ["id"]
    assert stats_of(add)["nullCount"] == {"id": 0, "nothing": 2}


def test_mostly_distinct_columns_are_written_without_dictionaries(tmp_path: Path) -> None:
    # A column whose first rows are mostly distinct is written plain (its dictionary would
    # overflow); a repetitive one keeps its dictionary. The rows are the same either way.
    schema = schema_of(("id", LONG), ("k", LONG), ("s", STRING))
    n = 5000
    rows = [{"id": i, "k": i % 7, "s": f"s{i}"} for i in range(n)]
    layout = WriteLayout(str(tmp_path), schema)
    data = pa.Table.from_pylist(rows, schema=schema.to_arrow())
    (add,) = DataFileWriter(LocalLogStore(), layout).write(data)
    chunks = pq.ParquetFile(paths.resolve(str(tmp_path), add.path)).metadata.row_group(0)
    dictionary = {
        chunks.column(i).path_in_schema: chunks.column(i).has_dictionary_page for i in range(3)
    }
    assert dictionary == {"id": False, "k": True, "s": False}
    assert read_parquet(paths.resolve(str(tmp_path), add.path), str(tmp_path)).to_pylist() == rows


def test_column_mapping_partition_first_read_by_duckdb(tmp_path: Path) -> None:
    fields = mapped_schema().fields
    schema = StructType((fields[3], *fields[:3], fields[4]))  # the partition column first
    rows = [
        {"part": p, "id": n, "s": {"a": n, "b": None}, "ts": None, "tags": None}
        for n, p in enumerate(["x y", "x y", "a%b", None])
    ]
    configuration = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7"}
    write_table(
        tmp_path,
        schema,
        pa.Table.from_pylist(rows, schema=schema.to_arrow()),
        ["part"],
        protocol=(2, 5),
        configuration=configuration,
    )
    assert_readers_agree(tmp_path, expected_rows(rows, schema, ["part"]))


def test_layout_of_snapshot(tmp_path: Path) -> None:
    schema = schema_of(("id", LONG), ("p", STRING))
    commit(tmp_path, schema, ["p"], [], protocol=(3, 7), features=["deletionVectors"])
    snapshot = DeltaLog.for_table(str(tmp_path)).update()
    layout = WriteLayout.of(snapshot, max_records_per_file=1)
    assert layout.partition_columns == ("p",)
    assert layout.stats_tight_bounds is True
    rows = [{"id": 1, "p": "a"}, {"id": 2, "p": "a"}]
    adds = DataFileWriter(LocalLogStore(), layout).write(pa.Table.from_pylist(rows))
    assert len(adds) == 2
    assert all(stats_of(a)["tightBounds"] is True for a in adds)


def test_sliced_lists_and_maps_with_nulls_are_cast_to_the_schema() -> None:
    """Rows whose list and map columns hold nulls and need a cast to the table's types are
    conformed whether or not the input is a slice (a slice's offsets do not start at 0, and
    Arrow rebuilds no list from such offsets under a null mask)."""
    from deltalog.write.conform import conform_table

    rows = [
        {"a": [1], "m": [("k", 1)]},
        {"a": None, "m": None},
        {"a": [2, 3], "m": [("j", 2), ("i", 3)]},
        {"a": None, "m": None},
        {"a": [], "m": []},
    ]
    given = pa.schema([("a", pa.large_list(pa.int64())), ("m", pa.map_(pa.string(), pa.int64()))])
    table = pa.Table.from_pylist(rows, given)
    schema = StructType(
        (
            StructField("a", ArrayType(PrimitiveType("integer"))),
            StructField("m", MapType(PrimitiveType("string"), PrimitiveType("integer"))),
        )
    )
    for start, length in ((0, 5), (1, 4), (2, 2), (3, 2), (5, 0)):
        conformed = conform_table(table.slice(start, length), schema)
        assert conformed.schema == schema.to_arrow()
        assert conformed.to_pylist() == rows[start : start + length]
