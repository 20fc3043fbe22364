"""Filtered reads open only the files that can match, and return exactly Spark's filtered rows.

The files a read opens are Spark's own account of its scan (``DataFrame.inputFiles()``); the
rows are compared with the unpruned ``toDF().where(...)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltalog.spark.session import to_arrow
from deltalog.tables import DeltaTable, read_table
from tests.conformance.rows import canonical
from tests.unit.scan.test_data_skipping import _batch

pytestmark = pytest.mark.spark
import deltalake  # noqa: E402 (the oracle is required: a missing one fails the suite)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("spark-skipping") / "t"
    for n in range(8):
        deltalake.write_deltalake(str(root), _batch(n), mode="append", partition_by=["part"])
    return str(root)


def _spark_filter(df: Any, condition: Any) -> Any:
    """Spark's own filter, without deltalog's pushdown: every file of the read is opened."""
    return type(df).filter.__wrapped__(df, condition)


def _same_rows(spark: Any, root: str, where: str, opened: int) -> None:
    pruned = read_table(spark, root, where=where)
    assert len(pruned.inputFiles()) == opened, where
    full = _spark_filter(DeltaTable.forPath(spark, root).toDF(), where)
    assert canonical(to_arrow(pruned)) == canonical(to_arrow(full))


@pytest.mark.parametrize(
    ("where", "opened"),
    [
        ("part = 'p1'", 3),  # partition pruning
        ("id BETWEEN 31 AND 44", 2),  # min/max
        ("name IS NULL AND part = 'p0'", 1),  # null counts and partitions together
        ("part NOT IN ('p0', NULL)", 0),  # SQL: never true
        ("ts >= '2024-01-01 06:00:00' OR id < 3", 3),
    ],
)
def test_filtered_read_opens_only_matching_files(
    spark: Any, table: str, where: str, opened: int
) -> None:
    _same_rows(spark, table, where, opened)


def test_session_time_zone_is_honoured(spark: Any, table: str) -> None:
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Shanghai")
    try:
        _same_rows(spark, table, "ts < '2024-01-01 09:30:00'", 2)  # 01:30 UTC
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_an_unset_session_time_zone_is_the_jvm_s(spark: Any, table: str) -> None:
    """Unset, ``spark.sql.session.timeZone`` is the JVM's zone (Spark's default), not UTC."""
    from deltalog.spark.session import session_time_zone_id

    jvm_zone = spark._jvm.java.util.TimeZone
    previous_default = jvm_zone.getDefault()
    key = "spark.sql.session.timeZone"
    previous = spark.conf.get(key) if spark._jsparkSession.conf().contains(key) else None
    spark.conf.unset(key)
    jvm_zone.setDefault(jvm_zone.getTimeZone("Asia/Shanghai"))
    try:
        assert spark.sql("SELECT current_timezone()").first()[0] == "Asia/Shanghai"
        assert session_time_zone_id(spark) == "Asia/Shanghai"
        _same_rows(spark, table, "ts < '2024-01-01 09:30:00'", 2)  # 01:30 UTC
    finally:
        jvm_zone.setDefault(previous_default)
        if previous is not None:
            spark.conf.set(key, previous)


def test_column_mapping_and_deletion_vectors(spark: Any, copy_table: Any) -> None:
    mapped = str(copy_table("delta-rs/table_with_column_mapping"))
    _same_rows(spark, mapped, "`Super Name` = 'Timothy Lamb'", 1)
    dv = str(copy_table("delta-rs/table-with-dv-small"))
    _same_rows(spark, dv, "value > 20", 0)
    _same_rows(spark, dv, "value >= 5", 1)


def test_unparsed_filter_still_filters_rows(spark: Any, table: str) -> None:
    _same_rows(spark, table, "id % 7 = 0", 8)


def test_the_pruned_files_are_absent_from_the_plan(spark: Any, table: str) -> None:
    opened = {Path(p).name for p in read_table(spark, table, where="id < 10").inputFiles()}
    every = {Path(p).name for p in DeltaTable.forPath(spark, table).toDF().inputFiles()}
    assert len(every) == 8 and len(opened) == 1 and opened < every


def _entry_points(spark: Any, root: str) -> dict[str, Any]:
    return {
        "toDF": lambda: DeltaTable.forPath(spark, root).toDF(),
        "format(delta)": lambda: spark.read.format("delta").load(root),
        "versionAsOf": lambda: spark.read.format("delta").option("versionAsOf", 7).load(root),
    }


def _conditions() -> list[tuple[str, Any, int]]:
    from pyspark.sql import functions as F

    return [
        ("text", lambda df: df.where("id BETWEEN 31 AND 44"), 2),
        ("Column", lambda df: df.filter(F.col("id") < 10), 1),
        ("the read's own Column", lambda df: df.where(df["id"] >= 70), 1),
        ("chained", lambda df: df.where("part = 'p1'").where(F.col("id") < 40), 1),
        ("date literal cast", lambda df: df.where(F.col("ts") < "2024-01-01 01:30:00"), 2),
        ("not for skipping", lambda df: df.where(F.col("id") % 7 == 0), 8),
    ]


def test_columns_of_the_read_resolve_after_a_pushed_filter(spark: Any, table: str) -> None:
    """The pushed read keeps the read's attributes: code that takes columns from the read it
    filtered (``df.where(...).select(df["id"])``, joins on ``df.id``) runs as on Spark."""
    from pyspark.sql import functions as F

    df = read_table(spark, table)
    filtered = df.where("id < 25").where(F.col("id") >= 20)
    assert len(filtered.inputFiles()) == 1
    picked = filtered.select(df["id"], (df["score"] * 4).alias("x"))
    assert sorted((r.id, r.x) for r in picked.collect()) == [(i, float(i)) for i in range(20, 25)]
    cached = read_table(spark, table).cache()
    try:  # a cached read answers from its cache: nothing is read again, nothing is pushed
        plan = cached.where("id < 10")._jdf.queryExecution().executedPlan().toString()
        assert "InMemoryTableScan" in plan
    finally:
        cached.unpersist()
    keys = spark.range(22, 30).withColumnRenamed("id", "k")
    joined = filtered.join(keys, df["id"] == keys["k"]).select(df["id"])
    assert sorted(r.id for r in joined.collect()) == [22, 23, 24]


def test_filters_on_any_entry_point_skip_files(spark: Any, table: str) -> None:
    import deltalog

    deltalog.register(spark)
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        for entry, read in _entry_points(spark, table).items():
            for kind, apply, opened in _conditions():
                pruned = apply(read())
                assert len(pruned.inputFiles()) == opened, (entry, kind)
                spark_only = apply(_UnpushedRead(read()))
                assert len(spark_only.inputFiles()) == 8
                assert canonical(to_arrow(pruned)) == canonical(to_arrow(spark_only._df)), kind
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


class _UnpushedRead:
    """A read whose ``where``/``filter`` are Spark's own (the oracle for pushed filters)."""

    def __init__(self, df: Any) -> None:
        self._df = df

    def __getitem__(self, name: str) -> Any:
        return self._df[name]

    def where(self, condition: Any) -> Any:
        return _UnpushedRead(_spark_filter(self._df, condition))

    filter = where

    def inputFiles(self) -> list[str]:
        return list(self._df.inputFiles())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._df, name)


@pytest.mark.connect
def test_text_filters_skip_files_over_connect(connect_spark: Any, table: str) -> None:
    from pyspark.sql import functions as F

    import deltalog

    deltalog.register(connect_spark)
    df = connect_spark.read.format("delta").load(table)
    pruned = df.where("id BETWEEN 31 AND 44")
    assert len(pruned.inputFiles()) == 2
    expected = _spark_filter(df, "id BETWEEN 31 AND 44")
    assert canonical(to_arrow(pruned)) == canonical(to_arrow(expected))
    # Columns of the user's read resolve on what the pushed filter returns (plan ids kept).
    chained = df.where("id >= 20").where("id < 25").select(df["id"], df["part"])
    assert sorted(r.id for r in chained.collect()) == [20, 21, 22, 23, 24]
    assert len(df.where("id >= 20").where("id < 25").inputFiles()) == 1
    by_column = df.where(F.col("id") < 10)  # a Connect Column is Spark's alone: all rows right
    assert canonical(to_arrow(by_column)) == canonical(
        to_arrow(_spark_filter(df, F.col("id") < 10))
    )


@pytest.mark.parametrize(
    ("query", "opened"),
    [
        ("SELECT * FROM {t} WHERE id BETWEEN 31 AND 44", 2),
        ("SELECT * FROM {t} AS x WHERE x.id < 10 AND id % 2 = 0", 1),
        ("SELECT * FROM (SELECT * FROM {t} WHERE part = 'p1') s WHERE s.id < 40", 3),
        ("SELECT x.* FROM {t} x JOIN (SELECT 5 AS k) k ON x.id > k.k WHERE x.id < 10", 1),
        # an outer join's WHERE is not pushed (NULL-extended rows); b reads every file anyway
        ("SELECT * FROM (SELECT 5 AS k) k LEFT JOIN {t} x ON x.id = k.k WHERE x.id < 10", 8),
        ("SELECT a.* FROM {t} a JOIN {t} b ON a.id = b.id WHERE a.id < 10", 8),
    ],
)
def test_sql_where_skips_files(spark: Any, table: str, query: str, opened: int) -> None:
    import deltalog

    deltalog.register(spark)
    text = query.format(t=f"delta.`{table}`")
    pruned = spark.sql(text)
    assert len(pruned.inputFiles()) == opened
    every = DeltaTable.forPath(spark, table).toDF()
    every.createOrReplaceTempView("every_file")  # a view: Spark's own WHERE, nothing pushed
    try:
        expected = spark.sql(query.format(t="every_file"))
        assert canonical(to_arrow(pruned)) == canonical(to_arrow(expected))
    finally:
        spark.catalog.dropTempView("every_file")


def test_filter_that_skips_the_files_outside_hive_directories(spark: Any, tmp_path: Path) -> None:
    """A table whose partition values come from the log (one file lies outside its hive
    directory): a filter that skips that file leaves files the paths could describe; the
    filtered rows still carry the log's partition values."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "t"
    ids = list(range(10))
    rows = pa.table({"id": ids, "p": [i % 2 for i in ids]})
    deltalake.write_deltalake(str(root), rows, partition_by=["p"])
    pq.write_table(pa.table({"id": [100, 101]}), root / "loose.parquet")
    add = {
        "path": "loose.parquet",
        "partitionValues": {"p": "1"},
        "size": (root / "loose.parquet").stat().st_size,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps(
            {
                "numRecords": 2,
                "minValues": {"id": 100},
                "maxValues": {"id": 101},
                "nullCount": {"id": 0},
            }
        ),
    }
    (root / "_delta_log" / f"{1:020d}.json").write_text(json.dumps({"add": add}) + "\n")
    df = DeltaTable.forPath(spark, str(root)).toDF()
    low = df.filter("id < 50")
    assert sorted((r.id, r.p) for r in low.collect()) == [(i, i % 2) for i in ids]
    assert sorted((r.id, r.p) for r in df.filter("id >= 100").collect()) == [(100, 1), (101, 1)]
    assert sorted((r.id, r.p) for r in low.where(low["p"] == 1).collect()) == [
        (i, 1) for i in ids if i % 2
    ]


# Files of one double column holding the values parquet-mr's row-group filters mis-judge in
# files pyarrow or delta-rs write: a dictionary of only -0.0 (``v = 0`` is true in Spark), and
# min/max that ignore NaN (``NaN > 5`` is true in Spark). Spark filtering a plain DataFrame of
# the same rows is the expected answer.
FLOAT_FILES = [
    [-0.0],
    [-0.0, -0.0],
    [float("nan"), 1.0],
    [float("inf"), float("-inf")],
    [None, 2.5],
]
FLOAT_WHERES = ["v = 0", "v > 5", "v >= 0", "v < 0", "v IN (0, 1)", "v <=> 0", "NOT (v < 0)"]


@pytest.fixture(scope="module")
def float_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import pyarrow as pa

    import deltalog

    roots = {}
    for writer in ("deltalog", "delta-rs"):
        root = str(tmp_path_factory.mktemp("floats") / writer.replace("-", "_"))
        for rows in FLOAT_FILES:
            data = pa.table({"v": pa.array(rows, pa.float64())})
            if writer == "deltalog":
                deltalog.write_table(root, data, mode="append")
            else:
                deltalake.write_deltalake(root, data, mode="append")
        roots[writer] = root
    return roots


@pytest.mark.parametrize("writer", ["deltalog", "delta-rs"])
def test_nan_and_negative_zero_are_read_as_spark_filters_them(
    spark: Any, float_tables: dict[str, str], writer: str
) -> None:
    from pyspark.sql import types as T

    root = float_tables[writer]
    rows = [(v,) for file in FLOAT_FILES for v in file]
    schema = T.StructType([T.StructField("v", T.DoubleType())])
    plain = spark.createDataFrame(rows, schema)
    for where in FLOAT_WHERES:
        expected = sorted(repr(r.v) for r in plain.where(where).collect())
        for df in (
            read_table(spark, root, where=where),
            DeltaTable.forPath(spark, root).toDF().where(where),
        ):
            got = sorted(repr(r.v) for r in df.collect())
            assert got == expected, (writer, where)
