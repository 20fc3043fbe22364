"""add.stats of written files: true for the file's rows (checked against plain Python over the
inputs), the reference's column selection and truncation rules, and skipping that loses no rows
in deltalake and DuckDB (kernel)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltalog.actions import AddFile
from deltalog.schema import ArrayType, DecimalType, MapType, PrimitiveType, StructField, StructType
from deltalog.storage import LocalLogStore
from deltalog.write import DataFileWriter, StatsCollector, WriteLayout, file_stats, stats_columns
from deltalog.write.stats import footer_strings_exact
from tests.conformance.rows import canonical, duckdb_rows
from tests.unit.write.test_write_files import (
    BOOL,
    DATE,
    DOUBLE,
    INT,
    LONG,
    STRING,
    TS,
    TS_NTZ,
    assert_readers_agree,
    commit,
    expected_rows,
    schema_of,
    stats_of,
    write_table,
)

UTC = dt.UTC
DEC = DecimalType(9, 2)
ALL_TYPES = schema_of(
    ("p", STRING),
    ("i", INT),
    ("l", LONG),
    ("f", PrimitiveType("float")),
    ("d", DOUBLE),
    ("dec", DEC),
    ("s", STRING),
    ("date", DATE),
    ("ts", TS),
    ("b", BOOL),
    ("bin", PrimitiveType("binary")),
    ("nest", StructType((StructField("x", LONG), StructField("y", STRING)))),
    ("arr", ArrayType(LONG)),
    ("m", MapType(STRING, LONG)),
)


def random_rows(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rnd.random() < 0.15 else value

    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return [
        {
            "p": rnd.choice(["a", "b", "c"]),
            "i": maybe(rnd.randint(-(2**31), 2**31 - 1)),
            "l": maybe(rnd.randint(-(2**63), 2**63 - 1)),
            "f": maybe(pa.scalar(rnd.uniform(-1e6, 1e6), pa.float32()).as_py()),
            "d": maybe(rnd.uniform(-1e9, 1e9)),
            "dec": maybe(decimal.Decimal(rnd.randint(-(10**8), 10**8)).scaleb(-2)),
            "s": maybe("".join(rnd.choice("aZé☃ 0") for _ in range(rnd.randint(0, 20)))),
            "date": maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rnd.randint(-4000, 4000))),
            "ts": maybe(base + dt.timedelta(microseconds=rnd.randint(-(10**13), 10**13))),
            "b": maybe(rnd.random() < 0.5),
            "bin": maybe(rnd.randbytes(3)),
            "nest": maybe({"x": maybe(rnd.randint(0, 99)), "y": maybe(rnd.choice(["q", "r"]))}),
            "arr": maybe([rnd.randint(0, 5)]),
            "m": maybe([("k", 1)]),
        }
        for _ in range(n)
    ]


def ms(value: dt.datetime) -> str:
    """The reference's timestamp statistic: milliseconds, truncated down, UTC with Z."""
    value = value.astimezone(UTC).replace(tzinfo=None)
    return (
        value.replace(microsecond=value.microsecond // 1000 * 1000).isoformat(
            timespec="milliseconds"
        )
        + "Z"
    )


def python_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """min/max/nullCount of ``rows`` in plain Python, formatted as the stats should be."""

    def leaf(values: list[Any], fmt: Any = None) -> tuple[Any, Any, int]:
        present = [v for v in values if v is not None]
        nulls = len(values) - len(present)
        if fmt is None or not present:
            return None, None, nulls
        return fmt(min(present)), fmt(max(present)), nulls

    def same(v: Any) -> Any:
        return v

    columns: dict[str, tuple[Any, Any, int]] = {
        "i": leaf([r["i"] for r in rows], same),
        "l": leaf([r["l"] for r in rows], same),
        "f": leaf([r["f"] for r in rows], same),
        "d": leaf([r["d"] for r in rows], same),
        "dec": leaf([r["dec"] for r in rows], same),
        "s": leaf([r["s"] for r in rows], same),
        "date": leaf([r["date"] for r in rows], lambda v: v.isoformat()),
        "ts": leaf([r["ts"] for r in rows], ms),
        "b": leaf([r["b"] for r in rows]),
        "bin": leaf([r["bin"] for r in rows]),
        "arr": leaf([r["arr"] for r in rows]),
        "m": leaf([r["m"] for r in rows]),
    }
    nest = [r["nest"] or {"x": None, "y": None} for r in rows]
    nx = leaf([n["x"] for n in nest], same)
    ny = leaf([n["y"] for n in nest], same)
    mins = {k: v[0] for k, v in columns.items() if v[0] is not None}
    maxes = {k: v[1] for k, v in columns.items() if v[1] is not None}
    mins["nest"] = {k: v[0] for k, v in (("x", nx), ("y", ny)) if v[0] is not None}
    maxes["nest"] = {k: v[1] for k, v in (("x", nx), ("y", ny)) if v[1] is not None}
    nulls: dict[str, Any] = {k: v[2] for k, v in columns.items()}
    nulls["nest"] = {"x": nx[2], "y": ny[2]}
    return {"numRecords": len(rows), "minValues": mins, "maxValues": maxes, "nullCount": nulls}


def normalize(stats: dict[str, Any]) -> dict[str, Any]:
    """Parsed stats with float columns as floats (decimals parse as Decimal, exactly)."""
    out = json.loads(json.dumps(stats, default=str))
    for part in ("minValues", "maxValues"):
        for key in ("f", "d"):
            if key in stats[part]:
                out[part][key] = float(stats[part][key])
        if "dec" in stats[part]:
            out[part]["dec"] = str(stats[part]["dec"])
    return out


def test_stats_are_true_for_each_file(tmp_path: Path) -> None:
    rows = random_rows(300)
    table = pa.Table.from_pylist(rows, schema=ALL_TYPES.to_arrow())
    adds = write_table(tmp_path, ALL_TYPES, table.to_batches(max_chunksize=64), ["p"])
    assert sorted(a.partition_values["p"] for a in adds) == ["a", "b", "c"]
    for add in adds:
        mine = [r for r in rows if r["p"] == add.partition_values["p"]]
        want = python_stats(mine)
        want["minValues"]["dec"] = str(want["minValues"]["dec"])
        want["maxValues"]["dec"] = str(want["maxValues"]["dec"])
        got = normalize(stats_of(add))
        assert got == json.loads(json.dumps(want, default=str))
        # decimals are JSON numbers with the column's scale
        assert f'"dec":{want["minValues"]["dec"]}' in (add.stats or "")


def test_stats_collected_beside_the_parquet_write_are_the_same(tmp_path: Path) -> None:
    # One piece of more rows than _OVERLAPPED_ROWS into one file: its statistics are collected on
    # a thread of their own while parquet encodes the rows (write_table's writer).
    rows = random_rows(70_000, seed=11)
    table = pa.Table.from_pylist(rows, schema=ALL_TYPES.to_arrow())
    layout = WriteLayout(str(tmp_path), ALL_TYPES)
    with DataFileWriter(LocalLogStore(), layout, overlap_statistics=True) as writer:
        (add,) = writer.write(table)
    want = python_stats(rows)
    for part, pick in (("minValues", min), ("maxValues", max)):
        want[part]["dec"] = str(want[part]["dec"])
        want[part]["p"] = pick(r["p"] for r in rows)
    want["nullCount"]["p"] = 0
    assert normalize(stats_of(add)) == json.loads(json.dumps(want, default=str))


def test_string_truncation_and_tie_breakers() -> None:
    schema = schema_of(("s", STRING))
    cases: list[tuple[list[str], str | None, str | None]] = [
        (["short", "abc"], "abc", "short"),
        (["a" * 40], "a" * 32, "a" * 32 + "\x7f"),  # next char below U+007F
        (["é" * 40], "é" * 32, "é" * 32 + "\U0010ffff"),  # next char above it
        (["a" * 32 + "\U0010ffff" * 3 + "b"], "a" * 32, "a" * 32 + "\U0010ffff" * 3 + "\x7f"),
        # 31 'a' + a surrogate pair: the prefix keeps the whole pair (33 UTF-16 units)
        (["a" * 31 + "😀" + "x" * 10], "a" * 31 + "😀", "a" * 31 + "😀" + "\x7f"),
        # the U+10FFFF run does not fit in 64 units: no max
        (["a" * 32 + "\U0010ffff" * 17 + "b"], "a" * 32, None),
        # ... but a string that ends within 64 units is its own max
        (["a" * 32 + "\U0010ffff" * 16], "a" * 32, "a" * 32 + "\U0010ffff" * 16),
        (["b" * 33, "a" * 50], "a" * 32, "b" * 32 + "\x7f"),
    ]
    for values, low, high in cases:
        stats = json.loads(file_stats(pa.table({"s": values}), schema))
        assert stats["minValues"].get("s") == low, values
        assert stats["maxValues"].get("s") == high, values
        # the bounds hold (Python compares code points, as UTF-8 bytes sort)
        assert all(low <= v for v in values if low is not None)
        assert all(v <= high for v in values if high is not None)
    conf = {"delta.dataSkippingStringPrefixLength": "4"}
    stats = json.loads(file_stats(pa.table({"s": ["abcdefgh"]}), schema, configuration=conf))
    assert (stats["minValues"]["s"], stats["maxValues"]["s"]) == ("abcd", "abcd\x7f")


def test_floats_nan_and_infinity_bounds_are_left_out() -> None:
    schema = schema_of(("d", DOUBLE), ("f", PrimitiveType("float")))
    nan, inf = float("nan"), float("inf")
    data = pa.table(
        {"d": [1.0, nan, 3.0, None], "f": pa.array([-inf, 2.5, None, 1.0], pa.float32())}
    )
    stats = json.loads(file_stats(data, schema))
    assert stats["minValues"] == {"d": 1.0}  # -inf has no JSON number
    assert stats["maxValues"] == {"f": 2.5}  # any NaN makes Spark's max NaN
    assert stats["nullCount"] == {"d": 1, "f": 1}
    only_nan = json.loads(file_stats(pa.table({"d": [nan, nan]}), schema_of(("d", DOUBLE))))
    assert only_nan["minValues"] == {} and only_nan["maxValues"] == {}
    exact = json.loads(file_stats(pa.table({"f": pa.array([0.1], pa.float32())}), schema))
    assert exact["maxValues"]["f"] == pa.scalar(0.1, pa.float32()).as_py()  # never below 0.1f


def test_timestamps_truncate_to_milliseconds() -> None:
    schema = schema_of(("ts", TS), ("ntz", TS_NTZ), ("d", DATE))
    data = pa.table(
        {
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, 18, 0, 0, 123999, tzinfo=UTC),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                ],
                pa.timestamp("us", "UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(2024, 9, 9, 12, 34, 56, 123456), None], pa.timestamp("us")
            ),
            "d": pa.array([dt.date(2024, 2, 29), dt.date(1900, 1, 1)], pa.date32()),
        }
    )
    stats = json.loads(file_stats(data, schema))
    assert stats["minValues"] == {
        "ts": "1969-12-31T23:59:59.999Z",
        "ntz": "2024-09-09T12:34:56.123",
        "d": "1900-01-01",
    }
    assert stats["maxValues"] == {
        "ts": "2024-01-01T18:00:00.123Z",
        "ntz": "2024-09-09T12:34:56.123",
        "d": "2024-02-29",
    }


def test_indexed_columns() -> None:
    schema = schema_of(
        ("p", STRING),
        ("a", LONG),
        (
            "s",
            StructType(
                (StructField("x", LONG), StructField("y", StructType((StructField("z", STRING),))))
            ),
        ),
        ("arr", ArrayType(LONG)),
        ("B", STRING),
        ("we.ird", LONG),
    )

    def keys(conf: dict[str, str], partitions: tuple[str, ...] = ("p",)) -> list[tuple[str, ...]]:
        return [c.key for c in stats_columns(schema, partitions, conf)]

    assert keys({"delta.dataSkippingNumIndexedCols": "3"}) == [("a",), ("s", "x"), ("s", "y", "z")]
    assert keys({"delta.dataSkippingNumIndexedCols": "4"})[-1] == ("arr",)  # one leaf
    assert keys({"delta.dataSkippingNumIndexedCols": "0"}) == []
    assert len(keys({"delta.dataSkippingNumIndexedCols": "-1"})) == 6
    assert keys({"delta.dataSkippingNumIndexedCols": "1"}, ()) == [("p",)]
    assert keys({}) == keys({"delta.dataSkippingNumIndexedCols": "-1"})
    listed = {
        "delta.dataSkippingStatsColumns": "`we.ird`, b, S.y, nope, a.b",
        "delta.dataSkippingNumIndexedCols": "1",
    }
    # schema order, any case, a struct brings its leaves, unknown names ignored
    assert keys(listed) == [("s", "y", "z"), ("B",), ("we.ird",)]

    data = pa.table({"p": ["x"], "a": [1], "B": ["b"]})
    stats = json.loads(file_stats(data, schema, partition_columns=["p"], configuration=listed))
    assert stats == {
        "numRecords": 1,
        "minValues": {"s": {"y": {}}, "B": "b"},
        "maxValues": {"s": {"y": {}}, "B": "b"},
        "nullCount": {"s": {"y": {"z": 1}}, "B": 0, "we.ird": 1},  # absent columns count as null
    }
    none = json.loads(
        file_stats(data, schema, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    )
    assert none == {"numRecords": 1}
    tight = json.loads(file_stats(data, schema_of(("a", LONG)), tight_bounds=True))
    assert tight == {
        "numRecords": 1,
        "minValues": {"a": 1},
        "maxValues": {"a": 1},
        "nullCount": {"a": 0},
        "tightBounds": True,
    }
    boolean_only = json.loads(file_stats(pa.table({"b": [True]}), schema_of(("b", BOOL))))
    assert boolean_only == {"numRecords": 1, "nullCount": {"b": 0}}


def test_collector_merges_pieces() -> None:
    rows = random_rows(200, seed=3)
    table = pa.Table.from_pylist(rows, schema=ALL_TYPES.to_arrow())
    collector = StatsCollector.for_table(ALL_TYPES, ["p"])
    for batch in table.to_batches(max_chunksize=17):
        collector.update(batch)
    assert collector.to_json() == file_stats(table, ALL_TYPES, partition_columns=["p"])


def test_string_stats_from_the_footer_with_values_too_long_for_it(tmp_path: Path) -> None:
    # A written file's top-level strings take their statistics from its parquet footer, which
    # keeps no min/max for a row group holding a value over 4 KiB: that piece's min and max
    # come from the rows. One row group per batch (buffer of 1 byte); the longest values are
    # the bounds, in a middle row group; a column of nulls only; under column mapping, the
    # statistics and the footer's columns are keyed by physical name.
    assert footer_strings_exact()  # else every string's statistics come from the rows
    schema = schema_of(("s", STRING), ("t", STRING), ("n", STRING))
    batches = [
        ["m", "n"],
        ["~" * 5000, "b", None],  # the max, too long for the footer
        ["a" * 5000 + "z", "c"],  # the min, too long too
        ["d", "k" * 3000 + "\u00e9" * 600],  # too long, neither min nor max
        ["e", None],
    ]
    pieces = [[{"s": v, "t": v if v is None else v[:3], "n": None} for v in b] for b in batches]
    rows = [r for piece in pieces for r in piece]
    for mode in ("none", "name"):
        root = tmp_path / mode
        conf = {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "3"}
        mapped = StructType(
            tuple(
                StructField(f.name, f.type, True, physical(f.name, i + 1) if mode == "name" else {})
                for i, f in enumerate(schema.fields)
            )
        )
        layout = WriteLayout(str(root), mapped, (), mode, conf)
        writer = DataFileWriter(LocalLogStore(), layout, buffer_bytes=1)
        for piece in pieces:
            writer.add(pa.Table.from_pylist(piece, schema=schema.to_arrow()))
        (add,) = writer.finish()
        key = {f.name: f.physical_name if mode == "name" else f.name for f in mapped.fields}
        stats = stats_of(add)
        assert stats["numRecords"] == 11
        assert stats["minValues"] == {key["s"]: "a" * 32, key["t"]: "aaa"}
        assert stats["maxValues"] == {key["s"]: "~" * 32 + "\x7f", key["t"]: "~~~"}
        assert stats["nullCount"] == {key["s"]: 2, key["t"]: 2, key["n"]: 11}
        commit(root, mapped, [], [add], protocol=(2, 5), configuration=conf)
        assert_readers_agree(root, expected_rows(rows, mapped))
        skipped = [r for r in rows if r["s"] is not None and r["s"] > "zz"]
        found = deltalake_query(root, "s > 'zz'")
        assert canonical(found) == canonical(expected_rows(skipped, mapped))


def physical(name: str, column_id: int) -> dict[str, Any]:
    return {
        "delta.columnMapping.id": column_id,
        "delta.columnMapping.physicalName": f"col-{column_id:04d}-{name}",
    }


# -- skipping with real readers ------------------------------------------------------------------

SKIP_SCHEMA = schema_of(
    ("id", LONG),
    ("s", STRING),
    ("ts", TS),
    ("d", DATE),
    ("dec", DecimalType(10, 2)),
    ("x", DOUBLE),
    ("p", STRING),
)


def skip_rows() -> list[dict[str, Any]]:
    long_prefix = "k" * 40
    return [
        {
            "id": n,
            # the long strings differ only after the 32-character prefix
            "s": f"{long_prefix}{n:03d}" if n % 2 else f"s{n:03d}",
            "ts": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=1001 * n),
            "d": dt.date(2024, 1, 1) + dt.timedelta(days=n),
            "dec": decimal.Decimal(n).scaleb(-2),
            "x": float(n) / 3,
            "p": "a" if n < 30 else "b",
        }
        for n in range(60)
    ]


FILTERS: list[tuple[str, Any]] = [
    ("id = 17", lambda r: r["id"] == 17),
    ("id > 44", lambda r: r["id"] > 44),
    ("id < 3 or id >= 58", lambda r: r["id"] < 3 or r["id"] >= 58),
    (f"s = '{'k' * 40}021'", lambda r: r["s"] == "k" * 40 + "021"),
    (f"s > '{'k' * 40}050'", lambda r: r["s"] > "k" * 40 + "050"),
    ("s < 's005'", lambda r: r["s"] < "s005"),
    ("d = DATE '2024-01-20'", lambda r: r["d"] == dt.date(2024, 1, 20)),
    ("dec >= 0.55", lambda r: r["dec"] >= decimal.Decimal("0.55")),
    ("x > 15.0", lambda r: r["x"] > 15.0),
    # the max of a file is truncated to milliseconds: a reader must widen it
    (
        "ts = TIMESTAMP '2024-01-01 00:00:00.019019+00:00'",
        lambda r: r["ts"] == dt.datetime(2024, 1, 1, 0, 0, 0, 19019, tzinfo=UTC),
    ),
    (
        "ts >= TIMESTAMP '2024-01-01 00:00:00.050+00:00'",
        lambda r: r["ts"] >= dt.datetime(2024, 1, 1, 0, 0, 0, 50000, tzinfo=UTC),
    ),
]


def skipping_table(root: Path) -> list[AddFile]:
    rows = skip_rows()
    table = pa.Table.from_pylist(rows, schema=SKIP_SCHEMA.to_arrow())
    return write_table(root, SKIP_SCHEMA, table, ["p"], max_records_per_file=5)


def deltalake_query(root: Path, where: str) -> pa.Table:
    import deltalake

    table = deltalake.DeltaTable(str(root))
    result = deltalake.QueryBuilder().register("t", table).execute(f"select * from t where {where}")
    return pa.table(result.read_all()) if hasattr(result, "read_all") else pa.table(result)


@pytest.mark.parametrize(("where", "keep"), FILTERS, ids=[f[0][:30] for f in FILTERS])
def test_skipping_loses_no_rows(tmp_path: Path, where: str, keep: Any) -> None:
    adds = skipping_table(tmp_path)
    assert len(adds) == 12
    want = canonical(expected_rows([r for r in skip_rows() if keep(r)], SKIP_SCHEMA, ["p"]))
    assert canonical(deltalake_query(tmp_path, where)) == want
    assert canonical(duckdb_rows(str(tmp_path), where=where)) == want


def test_skipping_check_has_teeth(tmp_path: Path) -> None:
    """With stats that lie, deltalake loses rows: the checks above do exercise skipping."""
    adds = skipping_table(tmp_path)
    lying = []
    for add in adds:
        stats = json.loads(add.stats or "{}")
        stats["maxValues"]["id"] = stats["minValues"]["id"]
        lying.append(
            AddFile(
                add.path,
                add.partition_values,
                add.size,
                add.modification_time,
                True,
                json.dumps(stats),
            )
        )
    commit(tmp_path, SKIP_SCHEMA, ["p"], lying)
    assert deltalake_query(tmp_path, "id = 17").num_rows == 0


def test_timestamp_units_other_than_micros() -> None:
    schema = schema_of(("ts", TS))
    ns = pa.array([-1, 1_700_000_000_123_999_999], pa.timestamp("ns", "UTC"))
    stats = json.loads(file_stats(pa.table({"ts": ns}), schema))
    assert stats["minValues"]["ts"] == "1969-12-31T23:59:59.999Z"
    assert stats["maxValues"]["ts"] == "2023-11-14T22:13:20.123Z"
