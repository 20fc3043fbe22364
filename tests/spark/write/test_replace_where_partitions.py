"""``replaceWhere`` on partition columns removes exactly the partitions Spark says match.

Every case overwrites a table with no rows under a condition on its partition column, so the
rows left are those for which the condition is not TRUE. The expected rows come from Spark
itself filtering a plain DataFrame of the same input rows; the table is read back by delta-rs.
Before the fix, conditions deltalog's evaluator could not decide (a decimal column, a string
literal against an int or boolean column, NaN) removed every file of the table.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import deltalog
from tests.conformance.rows import oracle_rows

pytestmark = pytest.mark.spark

_NAN, _INF = float("nan"), float("inf")

# type, partition values (one row each, id = position), conditions
CASES: dict[str, tuple[str, list[Any], list[str]]] = {
    "decimal": (
        "decimal(10,2)",
        ["-5.50", "0.00", "3.25", "10.00", None],
        ["p > 0", "p = 3.25", "p <= -5.5 OR p IS NULL"],
    ),
    "int": ("int", [5, 6, 7, 8, None], ["p = '7'", "p > 6.5", "p IN (5, 8)"]),
    "boolean": ("boolean", [True, False, None], ["p = 'true'", "p = false"]),
    "double": (
        "double",
        [-0.0, 0.0, _NAN, _INF, -1.5, None],
        ["p > 0", "p = 0", "p < 0"],
    ),
    "date": (
        "date",
        ["2024-02-28", "2024-02-29", "1969-12-31", None],
        ["p >= '2024-02-29'", "p < DATE'1970-01-01'"],
    ),
    "timestamp": (
        "timestamp",
        ["2021-01-01 00:00:00", "2021-06-01 12:30:00", "1960-01-01 00:00:00", None],
        ["p > '2021-01-01'", "p BETWEEN '1950-01-01' AND '2021-01-01'"],
    ),
    "string": ("string", ["a", " ", "é", "b", None], ["p = ' '", "p > 'a'", "p IN ('b', 'z')"]),
}


@pytest.fixture(scope="module")
def fmt(spark: Any) -> str:
    return deltalog.register(spark)


def _input(spark: Any, kind: str) -> Any:
    from pyspark.sql import functions as F

    spark_type, values, _ = CASES[kind]
    if kind == "double":  # NaN, -0.0 and inf as doubles, not through text
        return spark.createDataFrame(list(enumerate(values)), "id long, p double")
    rows = [(i, None if v is None else str(v)) for i, v in enumerate(values)]
    text = spark.createDataFrame(rows, "id long, raw string")
    return text.select("id", F.col("raw").cast(spark_type).alias("p"))


@pytest.mark.parametrize("kind", list(CASES))
def test_replace_where_on_a_partition_column_is_spark_s_condition(
    spark: Any, fmt: str, tmp_path: Path, kind: str
) -> None:
    source = _input(spark, kind)
    base = tmp_path / "base"
    source.write.format(fmt).partitionBy("p").save(str(base))
    assert sorted(oracle_rows(str(base)).column("id").to_pylist()) == list(
        range(len(CASES[kind][1]))
    )
    for n, condition in enumerate(CASES[kind][2]):
        root = tmp_path / f"case{n}"
        shutil.copytree(base, root)
        empty = source.limit(0)
        empty.write.format(fmt).mode("overwrite").option("replaceWhere", condition).save(str(root))
        kept = source.where(f"NOT coalesce(({condition}), false)")
        want = sorted(r.id for r in kept.select("id").collect())
        got = sorted(oracle_rows(str(root)).column("id").to_pylist())
        assert got == want, f"{kind}: replaceWhere {condition!r}"
