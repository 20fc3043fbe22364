"""``replaceWhere`` takes any deterministic condition without subqueries, as delta-spark does,
and removes exactly the rows Spark says match.

The expected rows come from Spark filtering a plain DataFrame of the same input rows; the tables
are read back by delta-rs. Data-column conditions were refused or mis-evaluated by deltalog's
own evaluator before (functions, arithmetic, ``LIKE``, ``<=>``, a boolean column alone, two
columns compared); the rewrite of the files holding matching rows now runs on Spark.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import deltalog
from deltalog import DeltaLog
from tests.conformance.rows import oracle_rows

pytestmark = pytest.mark.spark

_NAN, _INF = float("nan"), float("inf")
_SCHEMA = "id long, s string, v double, b boolean, w int, p int"
_ROWS = [
    (0, "a", -0.0, True, 3, 0),
    (1, "A", 0.0, False, 0, 0),
    (2, "ab", _NAN, None, 7, 1),
    (3, "", _INF, True, 3, 1),
    (4, None, -1.5, False, None, 2),
    (5, "é", 2.5, True, 10, 2),
    (6, "b", None, None, 6, 0),
    (7, "Abc", -_INF, False, -4, 1),
]
_CONDITIONS = [
    "lower(s) = 'a'",
    "abs(v) > 1",
    "v <=> NULL",
    "b",
    "w > id",
    "s LIKE 'a%'",
    "v = 0",
    "CAST(w AS STRING) = '3'",
    "w + 1 > 3 OR p = 2",
    "year(DATE'2024-01-01') = 2024 AND p = 1",
]


@pytest.fixture(scope="module")
def fmt(spark: Any) -> str:
    return deltalog.register(spark)


@pytest.fixture(scope="module")
def base(spark: Any, fmt: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rows over several files in three partitions, some files one row each."""
    root = tmp_path_factory.mktemp("replace_where") / "base"
    frame = spark.createDataFrame(_ROWS, _SCHEMA).repartition(3)
    frame.write.format(fmt).partitionBy("p").save(str(root))
    return root


def _kept_ids(spark: Any, condition: str) -> list[int]:
    from pyspark.sql import functions as F

    plain = spark.createDataFrame(_ROWS, _SCHEMA)
    return sorted(r.id for r in plain.where(~F.coalesce(F.expr(condition), F.lit(False))).collect())


def test_any_deterministic_condition_removes_what_spark_selects(
    spark: Any, fmt: str, base: Path, tmp_path: Path
) -> None:
    for n, condition in enumerate(_CONDITIONS):
        root = tmp_path / f"case{n}"
        shutil.copytree(base, root)
        empty = spark.createDataFrame([], _SCHEMA)
        empty.write.format(fmt).mode("overwrite").option("replaceWhere", condition).save(str(root))
        got = sorted(oracle_rows(str(root)).column("id").to_pylist())
        assert got == _kept_ids(spark, condition), condition


def test_written_rows_must_match_and_the_rest_is_kept(
    spark: Any, fmt: str, base: Path, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    shutil.copytree(base, root)
    condition = "abs(v) > 1"
    new = spark.createDataFrame([(10, "n", 9.0, True, 1, 1)], _SCHEMA)
    new.write.format(fmt).mode("overwrite").option("replaceWhere", condition).save(str(root))
    assert sorted(oracle_rows(str(root)).column("id").to_pylist()) == sorted(
        [*_kept_ids(spark, condition), 10]
    )
    version = DeltaLog.for_table(str(root)).update().version
    bad = spark.createDataFrame([(11, "n", 0.5, True, 1, 1)], _SCHEMA)
    with pytest.raises(Exception) as e:
        bad.write.format(fmt).mode("overwrite").option("replaceWhere", condition).save(str(root))
    assert "DELTA_REPLACE_WHERE_MISMATCH" in str(e.value)
    assert DeltaLog.for_table(str(root)).update().version == version


@pytest.mark.parametrize(
    ("condition", "error_class"),
    [
        ("rand() < 0.5", "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"),
        ("id IN (SELECT 1)", "DELTA_UNSUPPORTED_SUBQUERY"),
        ("w = DATE'2024-01-01'", "DATATYPE_MISMATCH"),
        ("nope = 1", "UNRESOLVED_COLUMN"),
    ],
)
def test_refused_conditions_change_nothing(
    spark: Any, fmt: str, base: Path, tmp_path: Path, condition: str, error_class: str
) -> None:
    root = tmp_path / "t"
    shutil.copytree(base, root)
    empty = spark.createDataFrame([], _SCHEMA)
    with pytest.raises(Exception) as e:
        empty.write.format(fmt).mode("overwrite").option("replaceWhere", condition).save(str(root))
    assert error_class in str(e.value)
    assert DeltaLog.for_table(str(root)).update().version == 0
    assert sorted(oracle_rows(str(root)).column("id").to_pylist()) == list(range(len(_ROWS)))


def test_change_feed_records_deletes_and_inserts(spark: Any, fmt: str, tmp_path: Path) -> None:
    from deltalake import DeltaTable as RsTable

    root = str(tmp_path / "cdf")
    frame = spark.createDataFrame(_ROWS, _SCHEMA).repartition(2)
    frame.write.format(fmt).option("delta.enableChangeDataFeed", "true").save(root)
    condition = "lower(s) = 'a'"
    new = spark.createDataFrame([(20, "a", 1.0, True, 1, 0)], _SCHEMA)
    new.write.format(fmt).mode("overwrite").option("replaceWhere", condition).save(root)
    changes = RsTable(root).load_cdf(starting_version=1, ending_version=1).read_all()
    pairs = sorted(
        zip(
            changes.column("_change_type").to_pylist(),
            changes.column("id").to_pylist(),
            strict=True,
        )
    )
    removed = sorted(set(range(len(_ROWS))) - set(_kept_ids(spark, condition)))
    assert pairs == sorted([*(("delete", i) for i in removed), ("insert", 20)])
    assert sorted(oracle_rows(root).column("id").to_pylist()) == sorted(
        [*_kept_ids(spark, condition), 20]
    )


def test_change_feed_rows_come_from_one_evaluation(spark: Any, fmt: str, tmp_path: Path) -> None:
    """The data files and the ``insert`` change files hold the same rows, from one evaluation
    of the written frame (the reference writes both from the same rows): a frame whose rows
    are counted as they are computed is computed once."""
    from deltalake import DeltaTable as RsTable
    from pyspark.sql import functions as F

    root = str(tmp_path / "once")
    frame = spark.createDataFrame(_ROWS, _SCHEMA)
    frame.write.format(fmt).option("delta.enableChangeDataFeed", "true").save(root)
    calls = spark.sparkContext.accumulator(0)

    def counted(i: int) -> int:
        calls.add(1)
        return i

    rows = [(20 + i, "a", 1.0, True, 1, 0) for i in range(5)]
    new = spark.createDataFrame(rows, _SCHEMA).withColumn("id", F.udf(counted, "long")("id"))
    new.write.format(fmt).mode("overwrite").option("replaceWhere", "lower(s) = 'a'").save(root)
    assert calls.value == len(rows)
    changes = RsTable(root).load_cdf(starting_version=1, ending_version=1).read_all()
    kinds = changes.column("_change_type").to_pylist()
    inserted = [
        i for i, k in zip(changes.column("id").to_pylist(), kinds, strict=True) if k == "insert"
    ]
    written = [r[0] for r in rows]
    assert sorted(inserted) == written
    assert set(oracle_rows(root).column("id").to_pylist()) >= set(written)
