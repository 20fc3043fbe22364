"""Parameter markers in Delta's statements (``deltalog.spark.sql.params``): literals against
Spark's own ``lit``, statements end to end with deltalake (binding on text alone, without Spark:
tests/unit/sql/test_params.py)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import deltalake

import deltalog
from deltalog.spark.sql.params import literal_sql

VALUES = [
    None,
    True,
    7,
    2**40,
    -1.5,
    1e-5,
    float("inf"),
    decimal.Decimal("12.340"),
    "a'b\\c",
    b"\x00\xff",
    dt.date(2024, 2, 29),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    [1, 2],
]


def test_literals_are_the_values_and_types_lit_makes(spark: Any) -> None:
    from pyspark.sql import functions as F

    expected = spark.range(1).select(*(F.lit(v).alias(f"c{i}") for i, v in enumerate(VALUES)))
    ours = spark.sql(
        "SELECT " + ", ".join(f"{literal_sql(v)} AS c{i}" for i, v in enumerate(VALUES))
    )
    assert [f.dataType for f in ours.schema] == [f.dataType for f in expected.schema]
    assert ours.first() == expected.first()


def test_delta_statements_take_parameters(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    deltalog.register(spark)
    path = str(tmp_path / "t")
    rows = [(i, f"s{i}") for i in range(10)]
    spark.createDataFrame(rows, "id long, s string").coalesce(1).write.format("delta").save(path)
    t = f"delta.`{path}`"
    spark.sql(f"DELETE FROM {t} WHERE id = :id OR s = :s", args={"id": 1, "s": "s2"})
    spark.sql(f"UPDATE {t} SET s = ? WHERE id >= ?", args=["big", 8])
    spark.sql(
        f"MERGE INTO {t} AS t USING (SELECT :k AS id, :v AS s) AS src ON t.id = src.id "
        "WHEN MATCHED THEN UPDATE SET s = src.s WHEN NOT MATCHED THEN INSERT *",
        args={"k": F.lit(3), "v": "merged"},
    )
    spark.sql(f"DELETE FROM {t} WHERE id = {{gone}}", gone=4)  # PySpark's own formatting
    expected = {i: s for i, s in rows if i not in (1, 2, 4)} | {3: "merged", 8: "big", 9: "big"}
    table = deltalake.DeltaTable(path)
    assert {r["id"]: r["s"] for r in table.to_pyarrow_table().to_pylist()} == expected
    restored = spark.sql(f"RESTORE TABLE {t} TO VERSION AS OF :v", args={"v": 0}).first()
    assert restored is not None and deltalake.DeltaTable(path).version() == 5
    deltalake_rows = deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["s"]) for r in deltalake_rows) == rows
    dry = spark.sql(f"VACUUM {t} RETAIN :h HOURS DRY RUN", args={"h": 168})
    assert dry.columns == ["path"]
