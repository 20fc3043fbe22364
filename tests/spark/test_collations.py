"""Collated strings on Spark 4 (``STRING COLLATE UTF8_LCASE``): the table keeps the collation,
filters, DELETE and MERGE select the rows Spark selects over plain parquet (``'ABC' = 'abc'``),
although every file's binary min/max statistics would skip the other case's file.

Expected rows come from Spark over a plain parquet copy of the same data, or from the inputs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.schema import collation

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark.sql.datasource") is None, reason="collations: Spark 4+"
)


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.collect())


def test_lcase_column_reads_deletes_and_merges_as_spark(spark: Any, tmp_path: Path) -> None:
    delta = deltalog.register(spark)
    # One file per case: binary bounds [ABC, ABC], [abc, abc] and [xyz, xyz].
    path, plain = str(tmp_path / "t"), str(tmp_path / "plain")
    for case, value in enumerate(("ABC", "abc", "xyz")):
        data = spark.sql(
            f"SELECT id, CAST('{value}' AS STRING COLLATE UTF8_LCASE) AS s FROM range(9) "
            f"WHERE id % 3 = {case}"
        ).coalesce(1)
        data.write.format(delta).mode("append").save(path)
        data.write.mode("append").parquet(plain)
    assert DeltaLog.for_table(path).update().all_files_arrow().num_rows == 3
    assert collation(DeltaLog.for_table(path).update().schema.field("s")) == "spark.UTF8_LCASE"

    table = spark.read.format(delta).load(path)
    assert str(table.schema["s"].dataType) == "StringType('UTF8_LCASE')"
    parquet = spark.read.parquet(plain)
    for condition in ("s = 'aBc'", "s IN ('ABC')", "s < 'B'", "s >= 'ABC' AND s <= 'abc'"):
        want = _ids(parquet.where(condition))
        assert want, condition  # each selects rows of both cases
        assert _ids(table.where(condition)) == want, condition
        assert _ids(spark.sql(f"SELECT id FROM delta.`{path}` WHERE {condition}")) == want

    spark.sql(f"DELETE FROM delta.`{path}` WHERE s = 'ABC'")
    assert _ids(spark.read.format(delta).load(path)) == _ids(parquet.where("NOT (s = 'ABC')"))

    # The source key equals the three 'xyz' rows' under UTF8_LCASE: all matched, none inserted.
    spark.sql(
        "SELECT 100 AS id, CAST('XYZ' AS STRING COLLATE UTF8_LCASE) AS s"
    ).createOrReplaceTempView("collated_source")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING collated_source src ON t.s = src.s "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    after = spark.read.format(delta).load(path)
    assert sorted((r["id"], r["s"]) for r in after.collect()) == [(100, "XYZ")] * 3
    spark.catalog.dropTempView("collated_source")
