"""Partition pruning and data skipping against an oracle: DataFusion (through deltalake) says
which files hold a matching row; the files we keep must include all of them, and the files we
drop are counted so pruning that stops working fails here."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog
from deltalog.scan.predicate import (
    And,
    Comparison,
    In,
    IsNull,
    Literal,
    Not,
    Opaque,
    Or,
    parse_predicate,
    push_down_not,
)
from deltalog.scan.skipping import prune_where, skipping_predicate

UTC = dt.UTC


def _batch(n: int) -> pa.Table:
    """File ``n`` of the table: ten rows whose values are a narrow, file-specific range."""
    ids = list(range(n * 10, n * 10 + 10))
    return pa.table(
        {
            "file_no": pa.array([n] * 10, pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "score": pa.array([i / 4 for i in ids], pa.float64()),
            "name": pa.array([None if n == 3 else f"n{n:02d}-{i % 3}" for i in ids]),
            "day": pa.array([dt.date(2024, 1, 1 + n)] * 10, pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, n, i % 10, tzinfo=UTC) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "flag": pa.array([n % 2 == 0] * 10),
            "part": pa.array([None if n == 5 else f"p{n % 3}" for _ in ids], pa.string()),
            "level": pa.array([n % 4] * 10, pa.int32()),
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("skipping") / "t"
    for n in range(8):
        deltalake.write_deltalake(
            str(root), _batch(n), mode="append", partition_by=["part", "level"]
        )
    return root


def _needed(root: Path, where: str) -> set[int]:
    dt_table = deltalake.DeltaTable(str(root))
    reader = (
        deltalake.QueryBuilder()
        .register("t", dt_table)
        .execute(f"select distinct file_no from t where {where}")
    )
    result = pa.table(reader.read_all())
    return set(result["file_no"].to_pylist())


def _kept(root: Path, where: str) -> set[int]:
    snapshot = DeltaLog.for_table(str(root)).snapshot
    files = prune_where(
        snapshot.all_files_arrow(), snapshot.schema, snapshot.partition_columns, where
    )
    return {json.loads(stats)["minValues"]["file_no"] for stats in files["stats"].to_pylist()}


# (filter, files kept) — the second member pins how much is skipped.
CASES = [
    ("id = 25", {2}),
    ("id < 25", {0, 1, 2}),
    ("id >= 70", {7}),
    ("25 > id", {0, 1, 2}),
    ("id BETWEEN 31 AND 44", {3, 4}),
    ("id NOT BETWEEN 10 AND 69", {0, 7}),
    ("id IN (5, 51, 52)", {0, 5}),
    ("NOT (id >= 20)", {0, 1}),
    ("id != 5", set(range(8))),
    ("score <= 2.5", {0, 1}),
    ("score > 10", set(range(8))),  # NaN would satisfy '>': floats keep the file
    ("name = 'n04-1'", {4}),
    ("name >= 'n06'", {6, 7}),
    ("name IS NULL", {3}),
    ("name IS NOT NULL", set(range(8)) - {3}),
    ("day = '2024-01-03'", {2}),
    ("day >= DATE '2024-01-07'", {6, 7}),
    ("ts < TIMESTAMP '2024-01-01T02:00:00+00:00'", {0, 1}),
    ("ts >= '2024-01-01 06:00:00'", {6, 7}),
    ("flag = false", {1, 3, 5, 7}),
    ("part = 'p1'", {1, 4, 7}),
    ("part IS NULL", {5}),
    ("part IN ('p0', 'p2')", {0, 2, 3, 6}),
    ("part NOT IN ('p0')", {1, 2, 4, 7}),
    ("part NOT IN ('p0', NULL)", set()),  # never true in SQL; DataFusion differs (see below)
    ("part = NULL", set()),
    ("level = 3 AND part = 'p1'", {7}),
    ("level = 3 OR id < 10", {0, 3, 7}),
    ("NOT (level = 0 OR part = 'p1')", {2, 3, 6}),  # NULL part: no match
    ("PART = 'p0' and ID > 50", {6}),
    ("`id` = 12", {1}),
    ("id = -1", set()),
    ("id + 1 = 12", set(range(8))),
    ("upper(name) = 'N01-0'", set(range(8))),
    ("id = level", set(range(8))),
    # Spark casts integer text to the integer column's type (ANSI: bigint) and compares numbers:
    # '5' is 5 in both modes. Other text ('6.5': 6 in Spark 3.5, an error under ANSI) keeps all.
    ("id = '5'", {0}),
    ("id = '5.5'", set(range(8))),
]

# DataFusion evaluates ``x NOT IN (..., NULL)`` as true for other values; in Spark (and standard
# SQL) it is NULL, so no row matches. tests/spark/read/test_skipping.py checks it on Spark.
DATAFUSION_DIFFERS = {"part NOT IN ('p0', NULL)"}


@pytest.mark.parametrize(("where", "kept"), CASES)
def test_skipping_keeps_every_file_with_a_match(table: Path, where: str, kept: set[int]) -> None:
    ours = _kept(table, where)
    if where in DATAFUSION_DIFFERS:
        needed = set()
    else:
        try:
            needed = _needed(table, where)
        except Exception:  # DataFusion does not take this SQL; the pinned answer still holds
            needed = set()
    assert needed <= ours, f"{where}: dropped {needed - ours}, which hold matching rows"
    assert ours == kept


def test_parse_shapes() -> None:
    assert parse_predicate("a = 1") == Comparison("a", "=", Literal(1, "int"))
    assert parse_predicate("1 < a") == Comparison("a", ">", Literal(1, "int"))
    assert parse_predicate("a <> 'x''y'") == Comparison("a", "!=", Literal("x'y", "string"))
    assert parse_predicate("a is not null or b in (1, 2.5)") == Or(
        IsNull("a", True), In("b", (Literal(1, "int"), Literal(decimal.Decimal("2.5"), "decimal")))
    )
    assert parse_predicate("not a = 1 and b is null") == And(
        Not(Comparison("a", "=", Literal(1, "int"))), IsNull("b")
    )
    # Spark's ``a <=> 1`` is never NULL: false for a NULL ``a``.
    assert parse_predicate("a <=> 1") == And(
        IsNull("a", True), Comparison("a", "=", Literal(1, "int"))
    )
    assert parse_predicate("a <=> NULL") == IsNull("a")
    assert parse_predicate("a <=> b") == Opaque("<=>")
    assert parse_predicate("s.inner = 2") == Comparison("s.inner", "=", Literal(2, "int"))
    assert parse_predicate("a = -3L") == Comparison("a", "=", Literal(-3, "int"))
    assert parse_predicate("a = DATE '2024-01-02'") == Comparison(
        "a", "=", Literal(dt.date(2024, 1, 2), "date")
    )


def test_not_is_pushed_to_the_leaves() -> None:
    p = push_down_not(parse_predicate("NOT (a < 1 OR NOT b IS NULL)"))
    assert p == And(Comparison("a", ">=", Literal(1, "int")), IsNull("b"))


@pytest.mark.parametrize("text", ["", "   ", "a =", "f(a) = 1", "a = 1 )", "a in ()", "'x"])
def test_text_outside_the_subset_skips_nothing(text: str) -> None:
    assert skipping_predicate(text) is None


def test_missing_or_unreadable_stats_keep_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), _batch(0), partition_by=["part"])
    snapshot = DeltaLog.for_table(str(root)).snapshot
    files = snapshot.all_files_arrow()
    for stats in (None, "{}", '{"numRecords": 10, "minValues": {"id": "x"}}'):
        broken = files.set_column(
            files.schema.get_field_index("stats"), "stats", pa.array([stats], pa.string())
        )
        kept = prune_where(broken, snapshot.schema, snapshot.partition_columns, "id = 999")
        assert kept.num_rows == 1, stats
    kept = prune_where(files, snapshot.schema, snapshot.partition_columns, "id = 999")
    assert kept.num_rows == 0


def test_timestamp_literals_use_the_session_time_zone(table: Path) -> None:
    snapshot = DeltaLog.for_table(str(table)).snapshot
    files = snapshot.all_files_arrow()
    # 08:00 in UTC+8 is midnight UTC: file 0 only holds rows before 01:00 UTC.
    utc8 = prune_where(
        files,
        snapshot.schema,
        snapshot.partition_columns,
        "ts < '2024-01-01 08:30:00'",
        time_zone="Asia/Shanghai",
    )
    utc = prune_where(
        files, snapshot.schema, snapshot.partition_columns, "ts < '2024-01-01 08:30:00'"
    )
    assert (utc8.num_rows, utc.num_rows) == (1, 8)


def test_a_zoneless_timestamp_in_an_unknown_session_zone_keeps_every_file_it_may_name(
    tmp_path: Path,
) -> None:
    """A transaction does not know Spark's session time zone: '2021-01-01 00:00:00' is then any
    instant from 2020-12-31T10:00Z (UTC+14) to 2021-01-01T12:00Z (UTC-12), so files on either
    side of midnight UTC may match. Read in UTC, the 20:00Z partition would be dropped, though a
    session in Asia/Tokyo (UTC+9, midnight = 15:00Z) selects it."""
    from deltalog.scan.skipping import files_matching

    instants = [dt.datetime(2020, 12, 31, h, tzinfo=UTC) for h in (5, 20)]
    instants.append(dt.datetime(2021, 1, 1, 18, tzinfo=UTC))
    root = tmp_path / "t"
    data = pa.table(
        {
            "id": pa.array(range(3), pa.int64()),
            "p": pa.array(instants, pa.timestamp("us", tz="UTC")),
            "t": pa.array(instants, pa.timestamp("us", tz="UTC")),
        }
    )
    deltalake.write_deltalake(str(root), data, partition_by=["p"])
    snapshot = DeltaLog.for_table(str(root)).update()
    files = snapshot.all_files_arrow()

    def kept(text: str, zone: str | None) -> list[int]:
        predicate = parse_predicate(text)
        matched = files_matching(
            files, snapshot.schema, snapshot.partition_columns, predicate, time_zone=zone
        )
        stats = [json.loads(s)["minValues"]["id"] for s in matched.column("stats").to_pylist()]
        return sorted(stats)

    # Which instants each reading of the literal selects, from the inputs: > the named instant.
    tokyo_midnight = dt.datetime(2020, 12, 31, 15, tzinfo=UTC)
    tokyo = [i for i, t in enumerate(instants) if t > tokyo_midnight]
    assert tokyo == [1, 2]
    for column in ("p", "t"):  # the partition column, and the statistics of a data column
        text = f"{column} > '2021-01-01 00:00:00'"
        assert set(tokyo) <= set(kept(text, None))
        assert kept(text, "Asia/Tokyo") == tokyo
        assert kept(text, "UTC") == [2]  # exact in UTC: the 20:00Z file is not after midnight
        # equality: the literal may name any instant from 10:00Z to 12:00Z the next day
        assert kept(f"{column} = '2021-01-01 00:00:00'", None) == [1]
        assert kept(f"{column} = '2021-01-01 00:00:00'", "UTC") == []
