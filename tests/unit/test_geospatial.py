"""Geometry and geography columns (the ``geospatial`` table feature) without Spark: the schema's
JSON names, the protocol such a column needs, the Python writer's bytes and statistics, and a
second deltalog write (OPTIMIZE, DELETE) over them.

Expected values come from the reference: Spark 4.3's JSON and simple names of its spatial
types (``GeometryType.jsonValue``/``simpleString``), delta-spark's ``GeoSpatialTableFeature``
(reader-writer, (3, 7), auto-enabled unless ``geospatial-dev`` is there, mixed SRIDs refused),
``StatisticsCollection`` (``nullCount`` only: not a ``SkippingEligibleDataType``) and the
parquet-format GEOMETRY/GEOGRAPHY logical types Spark's writer uses. deltalake 1.6.6 and
DuckDB's delta extension (both delta-kernel-rs) refuse such tables (asserted below), so the
files are checked against those rules and read by DuckDB's own parquet reader instead.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.features import (
    check_read_supported,
    check_write_supported,
    protocol_for_table,
)
from deltalog.geospatial import (
    WkbType,
    from_spark_arrow,
    to_spark_arrow,
    to_spark_arrow_table,
)
from deltalog.schema import (
    ArrayType,
    DataType,
    GeoType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    parse_schema,
    schema_from_arrow,
    simple_string,
)
from deltalog.skipping_columns import validate_stats_columns
from tests.conformance.rows import duckdb_rows, oracle_rows
from tests.unit.write.test_write_files import deltalog_rows

# Little-endian WKB points: POINT(1 2), POINT(2 2), POINT(0 0).
P12 = bytes.fromhex("0101000000000000000000F03F0000000000000040")
P22 = bytes.fromhex("010100000000000000000000400000000000000040")
P00 = bytes.fromhex("010100000000000000000000000000000000000000")
GEOMETRY = GeoType("geometry")
GEOGRAPHY = GeoType("geography")


def _field_json(type_name: str) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": "g", "type": type_name, "nullable": True, "metadata": {}}],
        }
    )


# -- the schema: Spark's names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "canonical", "simple"),
    [
        # Spark's own JSON: GeometryType(4326).jsonValue(), GeographyType(4326).jsonValue()...
        ("geometry(OGC:CRS84)", "geometry(OGC:CRS84)", "geometry(4326)"),
        ("geography(OGC:CRS84, SPHERICAL)", "geography(OGC:CRS84, SPHERICAL)", "geography(4326)"),
        ("geometry(EPSG:3857)", "geometry(EPSG:3857)", "geometry(3857)"),
        ("geometry(SRID:0)", "geometry(SRID:0)", "geometry(0)"),
        ("geometry(SRID:ANY)", "geometry(SRID:ANY)", "geometry(any)"),
        # The other forms Spark's (and delta-kernel's) parser takes, defaults filled in.
        ("geometry", "geometry(OGC:CRS84)", "geometry(4326)"),
        ("geography", "geography(OGC:CRS84, SPHERICAL)", "geography(4326)"),
        ("geography(OGC:CRS84)", "geography(OGC:CRS84, SPHERICAL)", "geography(4326)"),
        ("geography(SPHERICAL)", "geography(OGC:CRS84, SPHERICAL)", "geography(4326)"),
        (
            "geography( OGC:CRS84 , SPHERICAL )",
            "geography(OGC:CRS84, SPHERICAL)",
            "geography(4326)",
        ),
    ],
)
def test_spatial_types_parse_and_serialise_as_spark_names_them(
    written: str, canonical: str, simple: str
) -> None:
    schema = parse_schema(_field_json(written))
    t = schema.fields[0].type
    assert isinstance(t, GeoType)
    assert json.loads(schema.to_json())["fields"][0]["type"] == canonical
    assert simple_string(t) == simple
    assert schema.to_arrow().field("g").type == pa.binary()  # WKB


def test_spatial_types_nest_and_round_trip() -> None:
    schema = StructType(
        (
            StructField("s", StructType((StructField("inner", GEOMETRY),))),
            StructField("a", ArrayType(GEOGRAPHY)),
            StructField("m", MapType(PrimitiveType("string"), GeoType("geometry", "EPSG:3857"))),
        )
    )
    assert parse_schema(schema.to_json()) == schema
    assert "geometry(EPSG:3857)" in schema.to_json()
    with pytest.raises(ValueError):
        parse_schema(_field_json("geometry(4326)"))  # a simple string, not a JSON name


def test_geoarrow_wkb_columns_are_geospatial_columns() -> None:
    arrow = pa.schema(
        [
            ("g", WkbType(b'{"crs":"EPSG:3857"}')),
            ("h", WkbType(b'{"crs":"OGC:CRS84","edges":"spherical"}')),
            ("d", WkbType(b"")),
            ("b", pa.binary()),
        ]
    )
    types = [f.type for f in schema_from_arrow(arrow).fields]
    assert types == [
        GeoType("geometry", "EPSG:3857"),
        GeoType("geography", "OGC:CRS84", "SPHERICAL"),
        GEOMETRY,
        PrimitiveType("binary"),
    ]


# -- the protocol ----------------------------------------------------------------------------


def _schema(*types: DataType) -> StructType:
    return StructType(tuple(StructField(f"c{i}", t) for i, t in enumerate(types)))


@pytest.mark.parametrize(
    "schema",
    [
        _schema(GEOMETRY),
        _schema(GEOGRAPHY),
        _schema(StructType((StructField("inner", GEOMETRY),))),
        _schema(ArrayType(GEOMETRY)),
        _schema(MapType(PrimitiveType("string"), GEOGRAPHY)),
    ],
)
def test_a_spatial_column_enables_geospatial_at_3_7(schema: StructType) -> None:
    protocol, _ = protocol_for_table({}, schema, None)
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert protocol.reader_features == ("geospatial",)
    assert set(protocol.writer_features or ()) == {"appendOnly", "invariants", "geospatial"}
    check_read_supported(protocol, "t")
    check_write_supported(protocol, "t", enabling=True)


def test_geospatial_is_added_to_an_existing_table_unless_the_preview_is_there() -> None:
    plain = _schema(PrimitiveType("long"))
    current, _ = protocol_for_table({}, plain, None)
    assert current.reader_features is None
    upgraded, _ = protocol_for_table({}, _schema(PrimitiveType("long"), GEOMETRY), current)
    assert upgraded.reader_features == ("geospatial",)  # silently: automaticallyUpdate...
    preview, _ = protocol_for_table({"delta.feature.geospatial-dev": "supported"}, plain, None)
    kept, _ = protocol_for_table({}, _schema(PrimitiveType("long"), GEOGRAPHY), preview)
    assert kept == preview
    assert kept.reader_features == ("geospatial-dev",)
    check_read_supported(kept, "t")
    check_write_supported(kept, "t")


@pytest.mark.parametrize("t", [GeoType("geometry", "SRID:ANY"), GeoType("geography", "SRID:ANY")])
def test_mixed_srid_columns_are_refused(t: GeoType) -> None:
    nested = _schema(StructType((StructField("inner", t),)))
    with pytest.raises(errors.DeltaWriteError) as e:
        protocol_for_table({}, nested, None, "t")
    assert e.value.error_class == "DELTA_GEOSPATIAL_SRID_NOT_SUPPORTED"
    assert "c0.inner" in str(e.value)


# -- Spark's Arrow form ----------------------------------------------------------------------


def test_spark_arrow_form_converts_both_ways() -> None:
    fields = [pa.field("srid", pa.int32(), False), pa.field("wkb", pa.binary(), False)]
    spark = pa.StructArray.from_arrays(
        [pa.array([4326, 4326, 0], pa.int32()), pa.array([P12, b"", P22])],
        fields=fields,
        mask=pa.array([False, True, False]),
    )
    wkb = from_spark_arrow(spark.slice(0, 2), GEOMETRY, "g")
    assert wkb.to_pylist() == [P12, None]
    back = to_spark_arrow(wkb, GEOMETRY)
    assert back.to_pylist() == [{"srid": 4326, "wkb": P12}, None]
    with pytest.raises(errors.InvalidArgumentError, match="SRID 0"):
        from_spark_arrow(spark, GEOMETRY, "g")  # a geometry(4326) column holds SRID 4326 only


def test_logical_rows_take_spark_arrow_form_with_its_field_marks() -> None:
    # What Spark hands a mapInArrow function for geometry(4326) and geography(4326) columns:
    # struct<srid: int32 not null, wkb: binary not null>, wkb marked with the kind and SRID.
    schema = _schema(
        PrimitiveType("long"), GEOMETRY, StructType((StructField("inner", GEOGRAPHY),))
    )
    rows = pa.table(
        {
            "c0": pa.array([1, 2], pa.int64()),
            "c1": pa.array([P12, None], pa.binary()),
            "c2": pa.array([{"inner": P22}, None], pa.struct([("inner", pa.binary())])),
        }
    )
    out = to_spark_arrow_table(rows, schema)
    spark_struct = pa.struct(
        [pa.field("srid", pa.int32(), False), pa.field("wkb", pa.binary(), False)]
    )
    g = out.schema.field("c1").type
    assert g == spark_struct
    assert g.field("wkb").metadata == {b"geometry": b"true", b"srid": b"4326"}
    inner = out.schema.field("c2").type.field("inner").type
    assert inner == spark_struct
    assert inner.field("wkb").metadata == {b"geography": b"true", b"srid": b"4326"}
    assert out.column("c1").to_pylist() == [{"srid": 4326, "wkb": P12}, None]
    assert out.column("c2").to_pylist() == [{"inner": {"srid": 4326, "wkb": P22}}, None]


# -- files: the Python writer ------------------------------------------------------------------


def _geo_table(ids: list[int], g: list[bytes | None], h: list[bytes | None]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "g": pa.ExtensionArray.from_storage(
                WkbType(b'{"crs":"OGC:CRS84"}'), pa.array(g, pa.binary())
            ),
            "h": pa.ExtensionArray.from_storage(
                WkbType(b'{"crs":"OGC:CRS84","edges":"spherical"}'), pa.array(h, pa.binary())
            ),
        }
    )


def _adds(root: Path) -> list[dict[str, object]]:
    snapshot = DeltaLog.for_table(str(root)).update()
    return list(snapshot.all_files_arrow().to_pylist())


def test_python_writer_writes_wkb_with_parquet_geo_types_and_null_counts_only(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    deltalog.write_table(str(root), _geo_table([1, 2, 3], [P12, None, P22], [P22, P12, None]))
    log = (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    protocol = next(json.loads(x)["protocol"] for x in log if '"protocol"' in x)
    assert protocol["readerFeatures"] == ["geospatial"]
    meta = next(json.loads(x)["metaData"] for x in log if '"metaData"' in x)
    types = [f["type"] for f in json.loads(meta["schemaString"])["fields"]]
    assert types == ["long", "geometry(OGC:CRS84)", "geography(OGC:CRS84, SPHERICAL)"]

    (path,) = glob.glob(str(root / "*.parquet"))
    parquet = pq.ParquetFile(path).schema
    assert str(parquet.column(1).logical_type).startswith("Geometry(")
    assert str(parquet.column(2).logical_type).startswith("Geography(")
    assert "algorithm=spherical" in str(parquet.column(2).logical_type)

    (add,) = _adds(root)
    stats = json.loads(str(add["stats"]))
    # delta-spark: min/max for eligible types only, a null count for every indexed leaf.
    assert stats == {
        "numRecords": 3,
        "minValues": {"id": 1},
        "maxValues": {"id": 3},
        "nullCount": {"id": 0, "g": 1, "h": 1},
    }
    rows = deltalog_rows(root).sort_by("id").to_pydict()
    assert rows == {"id": [1, 2, 3], "g": [P12, None, P22], "h": [P22, P12, None]}

    # DuckDB's parquet reader sees the GEOMETRY types and the same WKB.
    import duckdb

    con = duckdb.connect()
    described = con.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    assert [r[1] for r in described] == ["BIGINT", "GEOMETRY", "GEOMETRY"]
    got = con.sql(f"SELECT id, ST_AsWKB(g) FROM read_parquet('{path}') ORDER BY id").fetchall()
    assert [(i, None if b is None else bytes(b)) for i, b in got] == [(1, P12), (2, None), (3, P22)]


def test_delta_kernel_readers_refuse_geospatial_tables(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deltalog.write_table(str(root), _geo_table([1], [P12], [P22]))
    with pytest.raises(Exception, match=r"Unsupported Delta table type: 'geometry\(OGC:CRS84\)'"):
        oracle_rows(str(root))
    with pytest.raises(Exception, match=r"Unsupported Delta table type: 'geometry\(OGC:CRS84\)'"):
        duckdb_rows(str(root))


def test_second_deltalog_writes_keep_the_values(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deltalog.write_table(str(root), _geo_table([1, 2], [P12, None], [P22, P00]))
    deltalog.write_table(str(root), _geo_table([3], [P00], [None]), mode="append")
    deltalog.optimize(str(root))  # read both files, write one
    (add,) = _adds(root)
    assert json.loads(str(add["stats"]))["nullCount"] == {"id": 0, "g": 1, "h": 1}
    deltalog.delete(str(root), "id = 2")  # rewrites the file without the row
    rows = deltalog_rows(root).sort_by("id").to_pydict()
    assert rows == {"id": [1, 3], "g": [P12, P00], "h": [P22, None]}
    (path,) = [str(root / str(a["path"])) for a in _adds(root)]
    assert str(pq.ParquetFile(path).schema.column(1).logical_type).startswith("Geometry(")


def test_spatial_columns_are_not_partition_columns_nor_skipping_keys(tmp_path: Path) -> None:
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.write_table(str(tmp_path / "p"), _geo_table([1], [P12], [P22]), partition_by="g")
    assert e.value.error_class == "DELTA_INVALID_PARTITION_COLUMN_TYPE"

    root = tmp_path / "t"
    deltalog.write_table(str(root), _geo_table([1], [P12], [P22]))
    deltalog.write_table(str(root), _geo_table([2], [None], [None]), mode="append")
    snapshot = DeltaLog.for_table(str(root)).update()
    assert snapshot.files_for_filter("id IS NULL").num_rows == 0  # null counts do skip...
    # ...but not on g: the first file's g has no null (nullCount 0), the second's is all null.
    assert snapshot.files_for_filter("g IS NULL").num_rows == 2
    assert snapshot.files_for_filter("g IS NOT NULL").num_rows == 2
    # delta-spark's OptimizeTableCommand: no Z-order by a spatial column.
    with pytest.raises(errors.InvalidArgumentError) as z:
        deltalog.optimize(str(root), z_order_by=["g"])
    assert z.value.error_class == "DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES"
    assert "geometry(4326)" in str(z.value)


@pytest.mark.parametrize("t", [GEOMETRY, StructType((StructField("inner", GEOGRAPHY),))])
def test_a_default_on_a_spatial_column_is_refused(t: DataType) -> None:
    """delta-spark's ``checkColumnDefaults`` (DeltaGeoSuite: CREATE TABLE ... g GEOMETRY DEFAULT
    NULL, and a STRUCT holding one): DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES."""
    conf = {"delta.feature.allowColumnDefaults": "supported"}
    schema = StructType((StructField("g", t, True, {"CURRENT_DEFAULT": "NULL"}),))
    with pytest.raises(errors.InvalidArgumentError) as e:
        protocol_for_table(conf, schema, None, "t")
    assert e.value.error_class == "DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES"
    assert "COLUMN DEFAULT" in str(e.value) and "g:" in str(e.value)
    defaulted = StructType(
        (
            StructField("n", PrimitiveType("long"), True, {"CURRENT_DEFAULT": "1"}),
            StructField("g", t),
        )
    )
    protocol_for_table(conf, defaulted, None, "t")  # a default on another column is fine


def test_spatial_clustering_columns_are_refused(tmp_path: Path) -> None:
    """delta-spark's ``validateClusteringColumnsInStatsSchema``: a geospatial column has no
    min/max statistics, so CLUSTER BY it (at CREATE TABLE or ALTER TABLE) is refused."""
    from deltalog.commands.ddl.alter_columns import cluster_by
    from deltalog.commands.ddl.create_table import TableSpec, create_table

    schema = _schema(PrimitiveType("long"), GEOMETRY)
    root = str(tmp_path / "created")
    with pytest.raises(errors.InvalidArgumentError) as e:
        create_table(root, "create", TableSpec(schema, cluster_by=("c1",)))
    assert e.value.error_class == "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"
    assert "c1 : GEOMETRY(4326)" in str(e.value)
    assert not list((tmp_path / "created").glob("_delta_log/*.json"))
    other = str(tmp_path / "altered")
    deltalog.write_table(other, _geo_table([1], [P12], [P22]))
    with pytest.raises(errors.InvalidArgumentError) as e:
        cluster_by(other, ["id", "h"])
    assert e.value.error_class == "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"
    assert "h : GEOGRAPHY(4326)" in str(e.value)
    assert DeltaLog.for_table(other).update().version == 0
    assert cluster_by(other, ["id"]) == 1  # a column with statistics is fine


def test_spatial_stats_columns_are_refused() -> None:
    """delta-spark's ``validateDataSkippingType``: a geospatial column named at the top level
    of ``delta.dataSkippingStatsColumns`` is refused; inside a named struct it only gets no
    statistics."""
    schema = _schema(PrimitiveType("long"), GEOMETRY, StructType((StructField("g", GEOGRAPHY),)))
    with pytest.raises(errors.InvalidArgumentError) as e:
        validate_stats_columns(schema, (), {"delta.dataSkippingStatsColumns": "c0, `C1`"}, "t")
    assert e.value.error_class == "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE"
    assert "'C1' of type geometry" in str(e.value)  # the name as listed, as the reference says
    validate_stats_columns(schema, (), {"delta.dataSkippingStatsColumns": "c0,c2"}, "t")
