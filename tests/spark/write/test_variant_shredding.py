"""Variant shredding on Spark 4.1+ (PROTOCOL.md "Variant Shredding"): Spark's parquet writer
infers a shredding schema unless told otherwise, and delta-spark tells it to shred only where
``delta.enableVariantShredding`` is true; deltalog passes the same write option. Expected rows
come from Spark over the source DataFrame; the files' layouts from their parquet schemas.
deltalake and DuckDB read neither shredded nor plain variants (deltalake refuses the feature,
DuckDB has no Arrow variant), so Spark is the only reader here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog
from tests.spark.confs import session_confs

FEATURES = {"variantShredding", "variantType"}


def _shredded(root: str) -> list[bool]:
    files = DeltaLog.for_table(root).update().all_files_arrow().column("path").to_pylist()
    return [
        "typed_value" in str(pq.read_schema(f"{root}/{p}").field("v").type) for p in sorted(files)
    ]


def _rows(df: Any) -> list[tuple[int, str]]:
    return sorted((r["id"], r["j"]) for r in df.selectExpr("id", "to_json(v) AS j").collect())


def test_spark_writes_shred_only_where_the_table_enables_it(spark: Any, tmp_path: Path) -> None:
    if tuple(int(x) for x in spark.version.split(".")[:2]) < (4, 1):
        pytest.skip("Spark's parquet writer shreds variants from 4.1")
    delta = deltalog.register(spark)
    source = spark.sql(
        'SELECT id, parse_json(format_string(\'{"a": %d, "b": "x%d"}\', id, id)) AS v '
        "FROM range(20)"
    ).coalesce(1)
    expected = _rows(source)
    shredding, plain = str(tmp_path / "shredding"), str(tmp_path / "plain")
    spark.sql(
        f"CREATE TABLE delta.`{shredding}` (id BIGINT, v VARIANT) USING delta "
        "TBLPROPERTIES ('delta.enableVariantShredding' = 'true')"
    )
    source.write.format(delta).mode("append").save(shredding)
    source.write.format(delta).save(plain)

    protocol = DeltaLog.for_table(shredding).update().protocol
    assert set(protocol.reader_features or ()) & set(protocol.writer_features or ()) >= FEATURES
    assert "variantShredding" not in (DeltaLog.for_table(plain).update().protocol.writer_features)
    assert _shredded(shredding) == [True]
    assert _shredded(plain) == [False]  # Spark 4.1+ would shred it by default
    for root in (shredding, plain):
        assert _rows(spark.read.format(delta).load(root)) == expected

    # The local engine refuses the shredded file; the DELETE runs on Spark, which rebuilds it.
    spark.sql(f"DELETE FROM delta.`{shredding}` WHERE id = 3")
    assert _rows(spark.read.format(delta).load(shredding)) == [r for r in expected if r[0] != 3]
    assert _shredded(shredding) == [True]

    # A shredding schema forced on the session may not reach a table that does not enable it.
    with (
        session_confs(spark, {"spark.sql.variant.forceShreddingSchemaForTest": "a int"}),
        pytest.raises(Exception, match="DELTA_SHREDDING_TABLE_PROPERTY_DISABLED"),
    ):
        source.write.format(delta).mode("append").save(plain)
    assert DeltaLog.for_table(plain).update().version == 0

    spark.sql(
        f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.enableVariantShredding' = 'true')"
    )
    protocol = DeltaLog.for_table(plain).update().protocol
    assert set(protocol.reader_features or ()) & set(protocol.writer_features or ()) >= FEATURES
