"""Geometry and geography columns on Spark 4.3: delta-spark's own Python test of them, ported
to deltalog's ``DeltaTable`` builder, and Spark's writes and reads of such columns through both
of deltalog's writers (Spark's parquet writer; the Python writer in mapInArrow tasks under
column mapping), with a second write by the other engine.

deltalake and DuckDB's delta extension refuse these tables (tests/unit/test_geospatial.py), so
the files are checked against what Spark's own parquet writer makes of the same DataFrame.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

import deltalog
from deltalog import DeltaLog
from deltalog.tables import DeltaTable
from tests.spark.confs import session_confs

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not hasattr(T, "GeometryType"), reason="PySpark before 4.1 has no spatial types"
    ),
]

P12 = "0101000000000000000000F03F0000000000000040"  # POINT(1 2), little-endian WKB
P22 = "010100000000000000000000400000000000000040"  # POINT(2 2)


@pytest.fixture(scope="module")
def fmt(spark: Any) -> str:
    return deltalog.register(spark)


def test_create_table_geo_types(spark: Any, fmt: str) -> None:
    """delta-spark's python/delta/tests/test_deltatable.py::test_create_table_geo_types (run by
    its classic and Connect suites): the builder makes a table of geometry(4326) and
    geography(4326) columns, read back with those types, nullable, and empty."""
    name = "geo_types_tbl"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    # delta-spark gates geo types behind these; deltalog does not need them (kept as upstream).
    confs = {
        "spark.sql.geospatial.enabled": "true",
        "spark.databricks.delta.geo.preview.enabled": "true",
    }
    try:
        with session_confs(spark, confs):
            table = (
                DeltaTable.create()
                .tableName(name)
                .addColumn("geom", dataType="geometry(4326)")
                .addColumn("geog", dataType="geography(4326)")
                .execute()
            )
            schema = table.toDF().schema
            assert schema.fieldNames() == ["geom", "geog"]
            assert [f.dataType for f in schema.fields] == [
                T.GeometryType(4326),
                T.GeographyType(4326),
            ]
            assert all(f.nullable for f in schema.fields)
            assert DeltaTable.forName(spark, name).toDF().count() == 0
            detail = table.detail().collect()[0]
            assert "geospatial" in detail["tableFeatures"]
            assert (detail["minReaderVersion"], detail["minWriterVersion"]) == (3, 7)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def _frame(spark: Any, first: int) -> Any:
    return spark.sql(
        f"SELECT id, ST_GeomFromWKB(X'{P12}', 4326) AS g,"
        f" IF(id % 2 = 0, NULL, ST_GeogFromWKB(X'{P22}')) AS h,"
        f" named_struct('inner', ST_GeomFromWKB(X'{P22}', 4326)) AS s,"
        f" array(ST_GeogFromWKB(X'{P12}')) AS a FROM range({first}, {first + 3})"
    )


def _wkb(row: Any) -> tuple[Any, ...]:
    def hex_of(v: Any) -> str | None:
        return None if v is None else bytes(v.getBytes()).hex().upper()

    return (row.id, hex_of(row.g), hex_of(row.h), hex_of(row.s.inner), [hex_of(x) for x in row.a])


def _logical_types(path: str) -> list[str]:
    schema = pq.ParquetFile(path).schema
    return [str(schema.column(i).logical_type).split("(")[0] for i in range(len(schema))]


@pytest.mark.parametrize("column_mapping", ["none", "name"])
def test_spark_writes_and_reads_spatial_columns(
    spark: Any, fmt: str, tmp_path: Path, column_mapping: str
) -> None:
    root = str(tmp_path / "t")
    # none: Spark's parquet writer; name: the Python writer (Spark's struct<srid, wkb> in Arrow).
    _frame(spark, 0).write.format(fmt).option("delta.columnMapping.mode", column_mapping).save(root)
    # Spark's own parquet writer is the reference for the bytes: same logical types per leaf.
    plain = str(tmp_path / "plain")
    _frame(spark, 0).coalesce(1).write.parquet(plain)
    (want,) = glob.glob(f"{plain}/*.parquet")
    for path in glob.glob(f"{root}/**/*.parquet", recursive=True):
        assert _logical_types(path) == _logical_types(want)

    snapshot = DeltaLog.for_table(root).update()
    assert snapshot.protocol.reader_features is not None
    assert "geospatial" in snapshot.protocol.reader_features
    id_key, g, h, s = (snapshot.schema.field(c).physical_name for c in ("id", "g", "h", "s"))
    h_nulls = 0
    for add in snapshot.all_files_arrow().to_pylist():
        stats = json.loads(add["stats"])
        # delta-spark: min/max for eligible types only; a null count for every indexed leaf.
        assert (set(stats["minValues"]), set(stats["maxValues"])) == ({id_key}, {id_key})
        nulls = stats["nullCount"]
        assert nulls[g] == 0 and list(nulls[s].values()) == [0]
        h_nulls += nulls[h]
    assert h_nulls == 2  # ids 0 and 2

    # A second write by deltalog's pure-Python engine (OPTIMIZE reads and rewrites every file).
    deltalog.optimize(root)
    expected = [(i, P12, None if i % 2 == 0 else P22, P22, [P12]) for i in range(3)]
    got = [_wkb(r) for r in spark.read.format(fmt).load(root).orderBy("id").collect()]
    assert got == expected
    assert DeltaLog.for_table(root).update().all_files_arrow().num_rows == 1
    # Spark appends to the file the Python engine wrote, then reads both.
    _frame(spark, 3).write.format(fmt).mode("append").save(root)
    got = [_wkb(r) for r in spark.read.format(fmt).load(root).orderBy("id").collect()]
    assert got == expected + [
        (i, P12, None if i % 2 == 0 else P22, P22, [P12]) for i in range(3, 6)
    ]
    # The Python data source (pyarrow on the executors) hands Spark the same values.
    from deltalog.spark.read.load import load_with_python_source

    source = load_with_python_source(spark.read.format(fmt), root)
    assert [_wkb(r) for r in source.orderBy("id").collect()] == got
