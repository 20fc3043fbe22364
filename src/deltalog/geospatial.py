"""Geometry and geography columns (the ``geospatial`` table feature): their bytes in parquet and
in Arrow, and the checks a table with them must pass.

A value is its WKB bytes. In parquet (Spark 4.2+ writes them so; parquet-format's GEOMETRY and
GEOGRAPHY logical types) a column is a BYTE_ARRAY annotated GEOMETRY(crs) or
GEOGRAPHY(crs, algorithm); pyarrow writes that annotation for a column of the GeoArrow
extension type ``geoarrow.wkb`` (:class:`WkbType`), whose JSON metadata names the CRS and, for
a geography, ``"edges": "spherical"``. In deltalog's Arrow tables (the Python reader and writer)
a geospatial column is plain ``binary`` WKB. Spark's own Arrow form is
``struct<srid: int32, wkb: binary>``, the ``wkb`` child marked ``{<kind>: true, srid: <n>}``
(what ``mapInArrow`` carries, and what Spark's ``ArrowColumnVector`` needs to read the value
back, from a Python data source too); the Spark boundary converts with
:func:`from_spark_arrow` and :func:`to_spark_arrow_table`.

Statistics (delta-spark's ``StatisticsCollection``): a geospatial column is a stats leaf with a
``nullCount`` and no ``minValues``/``maxValues`` (not a ``SkippingEligibleDataType``), and data
skipping never uses it. PROTOCOL.md says nothing of these types yet (no RFC at the reference's
head); delta-kernel's POINT bounds are not written (and are ignored when read).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from deltalog import errors
from deltalog.errors import optimize as optimize_errors
from deltalog.schema import (
    MIXED_SRID_CRS,
    ArrayType,
    DataType,
    GeoType,
    MapType,
    StructType,
    is_geo,
)

WKB_EXTENSION = "geoarrow.wkb"
_SPARK_FIELDS = ("srid", "wkb")


class WkbType(pa.ExtensionType):
    """GeoArrow's ``geoarrow.wkb`` over ``binary``: the type pyarrow writes as parquet's
    GEOMETRY/GEOGRAPHY logical type. Never registered (a user's geoarrow-pyarrow may own the
    name): only used to write, and files read back as ``binary``."""

    def __init__(self, metadata: bytes = b"") -> None:
        self._metadata = metadata
        super().__init__(pa.binary(), WKB_EXTENSION)

    def __arrow_ext_serialize__(self) -> bytes:
        return self._metadata

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> WkbType:
        return cls(serialized)

    def __reduce__(self) -> Any:  # pickled to Spark's executors with the physical schema
        return WkbType, (self._metadata,)


def wkb_type(t: GeoType) -> WkbType:
    """The physical (parquet) Arrow type of a column of type ``t``."""
    meta: dict[str, str] = {"crs": t.crs}
    if t.kind == "geography":
        meta["edges"] = t.algorithm.lower()
    return WkbType(json.dumps(meta, separators=(",", ":")).encode())


def is_spark_arrow(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether ``values`` are in Spark's Arrow form of a geospatial column."""
    t = values.type
    return pa.types.is_struct(t) and [t.field(i).name for i in range(t.num_fields)] == list(
        _SPARK_FIELDS
    )


def from_spark_arrow(values: pa.Array, t: GeoType, column: str) -> pa.Array:
    """Spark's ``struct<srid, wkb>`` values as WKB ``binary`` (null where the struct is).

    Raises:
        InvalidArgumentError: a value whose SRID is not the column's (a ``geometry(4326)``
            column holds SRID 4326 only).
    """
    import pyarrow.compute as pc  # only with rows: a snapshot load (features) never needs it

    srids = values.field("srid")
    wrong = pc.and_kleene(values.is_valid(), pc.not_equal(srids, t.srid))
    if pc.any(wrong).as_py():
        found = pc.filter(srids, wrong)[0].as_py()
        raise errors.invalid_argument(
            f"column {column} of type {t.json_name} (SRID {t.srid}) holds a value of SRID {found}"
        )
    wkb = values.field("wkb")
    if values.null_count == 0:
        return wkb.cast(pa.binary())
    return pc.if_else(values.is_valid(), wkb, pa.scalar(None, pa.binary()))


def to_spark_arrow(values: pa.Array, t: GeoType) -> pa.StructArray:
    """WKB ``binary`` values in Spark's Arrow form ``struct<srid, wkb>`` (the column's SRID)."""
    import pyarrow.compute as pc  # only with rows: a snapshot load (features) never needs it

    wkb = values.cast(pa.binary()) if values.type != pa.binary() else values
    srid = pa.array([t.srid] * len(wkb), pa.int32())
    filled = pc.fill_null(wkb, b"")
    # Spark marks the wkb child with the kind and SRID: how its ArrowColumnVector tells a
    # geometry from a plain struct (it reads the value with getBinary).
    marks = {t.kind: "true", "srid": str(t.srid)}
    fields = [pa.field("srid", pa.int32(), False), pa.field("wkb", pa.binary(), False, marks)]
    mask = wkb.is_null() if wkb.null_count else None
    return pa.StructArray.from_arrays([srid, filled], fields=fields, mask=mask)


def to_spark_arrow_table(table: pa.Table, schema: StructType) -> pa.Table:
    """``table`` (logical rows, WKB geospatial columns) with every geospatial value, nested
    too, in Spark's Arrow form: what a Python data source must hand Spark (PySpark checks its
    batches against the read schema's Arrow types). Columns not in ``schema`` are kept as
    they are; a table without geospatial columns is returned as it is."""
    by_name = {f.name: f for f in schema.fields}
    if not any(is_geo(f.type) for f in by_name.values()):
        return table
    columns, fields = [], []
    for name, column in zip(table.column_names, table.columns, strict=True):
        f = by_name.get(name)
        if f is None or not is_geo(f.type):
            columns.append(column)
            fields.append(table.schema.field(name))
            continue
        pieces = column.chunks or [pa.array([], column.type)]
        chunks = [_to_spark(c, f.type) for c in pieces]
        arrow_type = chunks[0].type
        columns.append(pa.chunked_array(chunks, type=arrow_type))
        fields.append(pa.field(name, arrow_type, table.schema.field(name).nullable))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _to_spark(values: pa.Array, t: DataType) -> pa.Array:
    if isinstance(t, GeoType):
        return to_spark_arrow(values, t)
    if not is_geo(t):
        return values
    mask = values.is_null() if values.null_count else None
    if isinstance(t, StructType):
        children = [_to_spark(values.field(i), f.type) for i, f in enumerate(t.fields)]
        fields = [
            pa.field(f.name, c.type, values.type.field(i).nullable)
            for i, (f, c) in enumerate(zip(t.fields, children, strict=True))
        ]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if isinstance(t, ArrayType):
        items = _to_spark(values.values, t.element_type)
        nullable = values.type.value_field.nullable
        element = pa.field("element", items.type, nullable)
        return pa.ListArray.from_arrays(values.offsets, items, type=pa.list_(element), mask=mask)
    assert isinstance(t, MapType)
    keys = _to_spark(values.keys, t.key_type)
    items = _to_spark(values.items, t.value_type)
    item = pa.field("value", items.type, values.type.item_field.nullable)
    map_type = pa.map_(pa.field("key", keys.type, False), item)
    return pa.MapArray.from_arrays(values.offsets, keys, items, type=map_type, mask=mask)


def check_srids(schema: StructType, table: str | None) -> None:
    """Refuse a geospatial column of mixed SRIDs (Spark's ``SRID:ANY``), as delta-spark's
    ``DeltaGeoSpatial.assertSridSupported`` does at every commit of a schema.

    Raises:
        DeltaWriteError: ``DELTA_GEOSPATIAL_SRID_NOT_SUPPORTED`` naming the column.
    """
    for path, t in geo_columns(schema):
        if t.crs == MIXED_SRID_CRS or t.srid < 0:
            raise errors.geospatial_srid_not_supported(path, t.json_name, table)


def check_no_defaults(schema: StructType, table: str | None) -> None:
    """Refuse a DEFAULT on a column that is or holds a geospatial type, as delta-spark's
    ``OptimisticTransaction.checkColumnDefaults`` does at CREATE/REPLACE TABLE and when a
    column's default is set.

    Raises:
        InvalidArgumentError: ``DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES`` naming the column.
    """
    for f in schema.fields:
        if not {"CURRENT_DEFAULT", "EXISTS_DEFAULT"} & set(f.metadata):
            continue
        found = geo_columns(f.type)
        if found:
            raise optimize_errors.operation_not_supported_for_data_types(
                "COLUMN DEFAULT",
                f.name,
                found[0][1].json_name,
                table or "",
                help=f"drop the DEFAULT of column {f.name}: geospatial columns take none.",
            )


def geo_columns(t: DataType, path: str = "") -> list[tuple[str, GeoType]]:
    """Every geospatial type in ``t`` with its column path (``element``, ``key``, ``value``
    through arrays and maps)."""
    if isinstance(t, GeoType):
        return [(path, t)]
    if isinstance(t, StructType):
        return [g for f in t.fields for g in geo_columns(f.type, _join(path, f.name))]
    if isinstance(t, ArrayType):
        return geo_columns(t.element_type, _join(path, "element"))
    if isinstance(t, MapType):
        keys = geo_columns(t.key_type, _join(path, "key"))
        return keys + geo_columns(t.value_type, _join(path, "value"))
    return []


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
