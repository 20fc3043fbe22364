"""Automatic type widening on Spark (delta-spark's ``TypeWideningInsertSchemaEvolution`` and
``TypeWideningMergeIntoSchemaEvolution`` suites): a DataFrame append with ``mergeSchema`` (or
the session's ``autoMerge``), SQL INSERT under ``autoMerge`` and MERGE with schema evolution
widen a column of a table that enables ``delta.enableTypeWidening``, record
``delta.typeChanges``, and Spark and DuckDB read the older, narrower files as the wider type.
delta-rs 1.6 refuses ``typeWidening``."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, duckdb_rows
from tests.spark.confs import session_confs

pytestmark = [
    pytest.mark.spark,
    # Spark's parquet reader widens the older files' types only from Spark 4.0 (reads refuse
    # such tables on 3.5: tests/spark/read/test_scan.py).
    pytest.mark.skipif(
        not __import__("pyspark").__version__.startswith(("4.", "5.")),
        reason="reading widened columns needs Spark 4.0+",
    ),
]

SCHEMA = "id {}, v {}, s {}, d {}"


def _fields(root: str) -> dict[str, dict[str, Any]]:
    schema = DeltaLog.for_table(root).update().metadata.schema_string
    assert schema is not None
    return {f["name"]: f for f in json.loads(schema)["fields"]}


def test_schema_evolution_widens_and_records_type_changes(spark: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(spark)
    root = str(tmp_path / "t")
    first = (1, 1.5, 1, Decimal("1.25"))
    narrow = SCHEMA.format("int", "float", "short", "decimal(5,2)")
    spark.createDataFrame([first], narrow).write.format(fmt).save(root)
    wide = spark.createDataFrame(
        [(2**40, 0.25, 2, Decimal("2.50"))], SCHEMA.format("long", "float", "short", "decimal(5,2)")
    )
    with pytest.raises(errors.DeltaWriteError) as e:  # the table does not enable widening
        wide.write.format(fmt).mode("append").option("mergeSchema", "true").save(root)
    assert e.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
    spark.sql(f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    with pytest.raises(errors.DeltaWriteError) as e:  # enabled, but no schema evolution
        wide.write.format(fmt).mode("append").save(root)
    assert e.value.error_class == "DELTA_METADATA_MISMATCH"
    wide.write.format(fmt).mode("append").option("mergeSchema", "true").save(root)
    doubles = spark.createDataFrame(
        [(3, 0.1, 3, Decimal("3.75"))], SCHEMA.format("long", "double", "short", "decimal(5,2)")
    )
    with session_confs(spark, {"spark.databricks.delta.schema.autoMerge.enabled": "true"}):
        doubles.write.format(fmt).mode("append").save(root)
        spark.sql(f"INSERT INTO delta.`{root}` VALUES (4, 0.5D, 70000, 4.00)")  # s: int
    source = spark.createDataFrame(
        [(1, Decimal("123.456")), (5, Decimal("5.125"))], "id long, d decimal(7,3)"
    )
    (
        DeltaTable.forPath(spark, root)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .withSchemaEvolution()
        .whenMatchedUpdate(set={"d": "s.d"})
        .whenNotMatchedInsert(values={"id": "s.id", "d": "s.d"})
        .execute()
    )
    fields = _fields(root)
    assert {k: f["type"] for k, f in fields.items()} == {
        "id": "long",
        "v": "double",
        "s": "integer",
        "d": "decimal(7,3)",
    }
    assert {k: f["metadata"]["delta.typeChanges"] for k, f in fields.items()} == {
        "id": [{"fromType": "integer", "toType": "long"}],
        "v": [{"fromType": "float", "toType": "double"}],
        "s": [{"fromType": "short", "toType": "integer"}],
        "d": [{"fromType": "decimal(5,2)", "toType": "decimal(7,3)"}],
    }
    history = DeltaTable.forPath(spark, root).history().orderBy("version").collect()
    assert [h.operation for h in history][-4:] == ["WRITE", "WRITE", "WRITE", "MERGE"]
    want = [
        (1, 1.5, 1, Decimal("123.456")),
        (2**40, 0.25, 2, Decimal("2.500")),
        (3, 0.1, 3, Decimal("3.750")),
        (4, 0.5, 70000, Decimal("4.000")),
        (5, None, None, Decimal("5.125")),
    ]
    got = spark.read.format(fmt).load(root).collect()
    assert sorted(tuple(r) for r in got) == sorted(want)
    expected = pa.table(
        {
            "id": [r[0] for r in want],
            "v": [r[1] for r in want],
            "s": pa.array([r[2] for r in want], pa.int32()),
            "d": pa.array([r[3] for r in want], pa.decimal128(7, 3)),
        }
    )
    assert canonical(duckdb_rows(root)) == canonical(expected)
