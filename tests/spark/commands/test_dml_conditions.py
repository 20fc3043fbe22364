"""DELETE, UPDATE and MERGE select the rows Spark's condition selects, and fail with Spark's
error where Spark refuses the condition, before anything is committed.

The expected rows come from Spark filtering a plain DataFrame of the same input rows; the
tables are read back by delta-rs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.tables import DeltaTable
from tests.conformance.rows import oracle_rows

pytestmark = pytest.mark.spark

_SCHEMA = "id long, p_ts timestamp, p_int int, v double"
_TEXT = [
    (0, "2021-01-01 00:00:00", 1, 1.0),
    (1, "2021-06-01 12:30:00", 2, -0.0),
    (2, "1960-01-01 00:00:00", 3, None),
    (3, None, None, 2.0),
    (4, "2021-01-01 00:00:01", 7, 0.0),
]


@pytest.fixture(scope="module")
def fmt(spark: Any) -> str:
    return deltalog.register(spark)


def _rows(spark: Any) -> Any:
    from pyspark.sql import functions as F

    text = spark.createDataFrame(_TEXT, "id long, ts string, p_int int, v double")
    return text.select("id", F.col("ts").cast("timestamp").alias("p_ts"), "p_int", "v")


@pytest.fixture(scope="module")
def base(spark: Any, fmt: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dml_conditions") / "base"
    _rows(spark).write.format(fmt).partitionBy("p_ts", "p_int").save(str(root))
    return root


def _copy(base: Path, tmp_path: Path, name: str) -> str:
    root = tmp_path / name
    shutil.copytree(base, root)
    return str(root)


def _ids_where(spark: Any, condition: str, *, kept: bool) -> list[int]:
    from pyspark.sql import functions as F

    hit = F.coalesce(F.expr(condition), F.lit(False))
    return sorted(r.id for r in _rows(spark).where(~hit if kept else hit).collect())


@pytest.mark.parametrize(
    "condition",
    ["p_ts > '2021-01-01'", "p_int = '7'", "p_int > 1.5 AND p_ts IS NOT NULL", "year(p_ts) = 2021"],
)
def test_delete_on_partition_columns_is_spark_s_condition(
    spark: Any, fmt: str, base: Path, tmp_path: Path, condition: str
) -> None:
    root = _copy(base, tmp_path, "t")
    DeltaTable.forPath(spark, root).delete(condition)
    got = sorted(oracle_rows(root).column("id").to_pylist())
    assert got == _ids_where(spark, condition, kept=True)


def _spark_error(spark: Any, condition: str) -> str | None:
    """The error class Spark raises filtering the plain rows by ``condition``, if it does
    (``p_int = 'x'`` raises under ANSI, Spark 4's default, and is NULL without it)."""
    try:
        _rows(spark).where(condition).collect()
    except Exception as e:  # Spark's own error: the expected answer
        return str(e)
    return None


@pytest.mark.parametrize(
    ("condition", "error_class"),
    [
        ("p_int = 'x'", "CAST_INVALID_INPUT"),
        ("p_ts = 20240229", "DATATYPE_MISMATCH"),
        ("id IN (SELECT 1)", "DELTA_UNSUPPORTED_SUBQUERY"),
    ],
)
def test_conditions_spark_refuses_fail_before_any_commit(
    spark: Any, fmt: str, base: Path, tmp_path: Path, condition: str, error_class: str
) -> None:
    root = _copy(base, tmp_path, "t")
    refused = _spark_error(spark, condition)
    if refused is None and error_class != "DELTA_UNSUPPORTED_SUBQUERY":
        # Spark answers (Spark 3.5 without ANSI): so must the command.
        DeltaTable.forPath(spark, root).delete(condition)
        got = sorted(oracle_rows(root).column("id").to_pylist())
        assert got == _ids_where(spark, condition, kept=True)
        return
    assert refused is None or error_class in refused
    with pytest.raises(Exception) as e:
        DeltaTable.forPath(spark, root).delete(condition)
    assert error_class in str(e.value)
    with pytest.raises(Exception) as e:
        DeltaTable.forPath(spark, root).update(condition, {"v": "1"})
    assert error_class in str(e.value)
    assert DeltaLog.for_table(root).update().version == 0


def test_merge_by_source_sees_rows_the_on_condition_prunes(
    spark: Any, fmt: str, base: Path, tmp_path: Path
) -> None:
    """A target-only conjunct of ON may not prune files when a NOT MATCHED BY SOURCE clause
    acts on the rows it is false for."""
    root = _copy(base, tmp_path, "t")
    source = spark.createDataFrame([(0,), (4,)], "id long")
    (
        DeltaTable.forPath(spark, root)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id AND t.p_int = 7")
        .whenMatchedUpdate(set={"v": "100"})
        .whenNotMatchedBySourceDelete()
        .execute()
    )
    got = oracle_rows(root)
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == {
        4: 100.0
    }


@pytest.mark.connect
def test_over_spark_connect(connect_spark: Any, base: Path, tmp_path: Path) -> None:
    """The same decisions over Spark Connect, where plans are analysed on the server: a
    partition-only DELETE, a refused condition, a replaceWhere with a function."""
    spark = connect_spark
    fmt = deltalog.register(spark)
    root = _copy(base, tmp_path, "t")
    DeltaTable.forPath(spark, root).delete("p_ts > '2021-01-01'")
    assert sorted(oracle_rows(root).column("id").to_pylist()) == [0, 2, 3]
    with pytest.raises(Exception) as e:
        DeltaTable.forPath(spark, root).delete("p_int = 'x'")
    assert "CAST_INVALID_INPUT" in str(e.value)
    empty = spark.createDataFrame([], _SCHEMA)
    writer = empty.write.format(fmt).mode("overwrite")
    writer.option("replaceWhere", "year(p_ts) < 2000 OR abs(v) > 1.5").save(root)
    assert sorted(oracle_rows(root).column("id").to_pylist()) == [0]
    with pytest.raises(Exception) as e:
        writer.option("replaceWhere", "rand() < v").save(root)
    assert "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED" in str(e.value)
    assert DeltaLog.for_table(root).update().version == 2
