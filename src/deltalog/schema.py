"""Table schemas: the Spark-JSON schema of ``metaData.schemaString`` (PROTOCOL.md "Schema
Serialization Format") as a typed tree, convertible to Arrow (here) and to Spark (in the Spark
layer, which parses the same JSON with ``StructType.fromJson``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from deltalog import errors

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
# Spark's spatial types as its JSON names them: ``geometry``, ``geometry(<crs>)``,
# ``geography``, ``geography(<crs>)``, ``geography(<algorithm>)``, ``geography(<crs>, <alg>)``.
_CRS = r"\w+:-?\w+"
_GEOMETRY = re.compile(rf"^geometry(?:\(\s*({_CRS})\s*\))?$")
_GEOGRAPHY = re.compile(rf"^geography(?:\(\s*(?:({_CRS})\s*,\s*(\w+)|({_CRS})|(\w+))\s*\))?$")

PRIMITIVE_NAMES = frozenset(
    {
        "string",
        "long",
        "integer",
        "short",
        "byte",
        "float",
        "double",
        "boolean",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
        "void",
        "variant",
    }
)


@dataclass(frozen=True, slots=True)
class PrimitiveType:
    """A primitive type by its Spark JSON name (``long``, ``timestamp_ntz``, ``variant``, ...)."""

    name: str


@dataclass(frozen=True, slots=True)
class DecimalType:
    """``decimal(precision, scale)``."""

    precision: int
    scale: int


@dataclass(frozen=True, slots=True)
class ArrayType:
    element_type: DataType
    contains_null: bool = True


@dataclass(frozen=True, slots=True)
class MapType:
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True


@dataclass(frozen=True, slots=True)
class StructField:
    name: str
    type: DataType
    nullable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def physical_name(self) -> str:
        """The column-mapping physical name, or the logical name without mapping."""
        return str(self.metadata.get("delta.columnMapping.physicalName", self.name))


# Field metadata Spark writes for string columns that do not compare by their UTF-8 bytes.
COLLATIONS_KEY = "__COLLATIONS"  # collations by path (protocol RFC collated-string-type)
CHAR_VARCHAR_KEY = "__CHAR_VARCHAR_TYPE_STRING"  # char(n) / varchar(n), as Spark declared it
_BINARY_COLLATIONS = frozenset({"spark.UTF8_BINARY", "UTF8_BINARY"})


def collation(field: StructField) -> str | None:
    """The collation of string column ``field``, as its ``__COLLATIONS`` metadata names it
    (``spark.UTF8_LCASE``, ``icu.UNICODE``...; keyed by the field's name, with ``.element``,
    ``.key`` and ``.value`` for strings inside arrays and maps), or ``None`` for the default
    UTF-8 binary collation, which writers never record."""
    collations = field.metadata.get(COLLATIONS_KEY)
    value = collations.get(field.name) if isinstance(collations, dict) else None
    return str(value) if value is not None and value not in _BINARY_COLLATIONS else None


_CHAR_VARCHAR = re.compile(r"\s*(char|character|varchar)\s*\(\s*(\d+)\s*\)\s*", re.IGNORECASE)


def parse_char_varchar(text: str) -> tuple[str, int] | None:
    """``("char", n)`` or ``("varchar", n)`` for a Spark type string ``CHAR(n)``,
    ``CHARACTER(n)`` or ``VARCHAR(n)`` (any case and spacing), else ``None``."""
    m = _CHAR_VARCHAR.fullmatch(text)
    if m is None:
        return None
    return ("varchar" if m.group(1).lower() == "varchar" else "char"), int(m.group(2))


def char_varchar(field: StructField) -> tuple[str, int] | None:
    """The ``CHAR(n)``/``VARCHAR(n)`` a string column was declared as (Spark keeps it as
    ``__CHAR_VARCHAR_TYPE_STRING`` field metadata), or ``None``."""
    declared = field.metadata.get(CHAR_VARCHAR_KEY)
    return parse_char_varchar(declared) if isinstance(declared, str) else None


def compares_by_bytes(field: StructField) -> bool:
    """Whether Spark compares ``field``'s values by their binary order (what min/max
    statistics and Arrow's kernels use). Not so for a column with a collation (``UTF8_LCASE``
    equates cases; checked for any collation recorded in the field, nested ones included) or
    a ``CHAR(n)`` column (Spark pads the literal to n)."""
    meta = field.metadata
    char = str(meta.get(CHAR_VARCHAR_KEY, "")).lower().startswith("char")
    collations = meta.get(COLLATIONS_KEY)
    collated = isinstance(collations, dict) and any(
        v not in _BINARY_COLLATIONS for v in collations.values()
    )
    return not (char or collated)


def field_at(schema: StructType, path: str) -> StructField | None:
    """The field at dotted ``path`` (``a.b``: field ``b`` of struct column ``a``), resolved
    case-insensitively as Spark resolves columns, or ``None``. A top-level name containing a
    dot wins over a nested path, as in Spark."""
    for f in schema.fields:
        if f.name.lower() == path.lower():
            return f
    head, _, rest = path.partition(".")
    if not rest:
        return None
    for f in schema.fields:
        if f.name.lower() == head.lower() and isinstance(f.type, StructType):
            return field_at(f.type, rest)
    return None


def field_at_parts(schema: StructType, path: Sequence[str]) -> StructField | None:
    """The field at ``path`` (one name per nesting level, matched ignoring case, through
    structs only), or ``None``."""
    current: DataType = schema
    found: StructField | None = None
    for part in path:
        if not isinstance(current, StructType):
            return None
        found = next((f for f in current.fields if f.name.lower() == part.lower()), None)
        if found is None:
            return None
        current = found.type
    return found


@dataclass(frozen=True, slots=True)
class StructType:
    fields: tuple[StructField, ...] = ()

    def field(self, name: str) -> StructField:
        """The field called ``name`` (case-insensitive, as Spark resolves columns)."""
        for f in self.fields:
            if f.name.lower() == name.lower():
                return f
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def to_json(self) -> str:
        return json.dumps(_type_to_json(self), separators=(",", ":"))

    def to_arrow(self) -> pa.Schema:
        """The Arrow schema with logical names."""
        return pa.schema([pa.field(f.name, to_arrow(f.type), f.nullable) for f in self.fields])


@dataclass(frozen=True, slots=True)
class GeoType:
    """A spatial column (Spark 4.1+ ``GEOMETRY``/``GEOGRAPHY``; the ``geospatial`` table
    feature): values are WKB, planar (``geometry``) or on the sphere (``geography``), in the
    coordinate reference system ``crs`` (``OGC:CRS84``, ``EPSG:3857``, ``SRID:0``; Spark's
    ``SRID:ANY`` is a column of mixed SRIDs, which Delta refuses)."""

    kind: str  # "geometry" or "geography"
    crs: str = "OGC:CRS84"
    algorithm: str = "SPHERICAL"  # edge interpolation of a geography (Spark knows SPHERICAL)

    @property
    def srid(self) -> int:
        """The SRID Spark gives the CRS (-1: mixed SRIDs, or a CRS it does not know)."""
        known = _SRIDS.get(self.crs)
        if known is not None:
            return known
        tail = self.crs.rsplit(":", 1)[-1]
        return int(tail) if tail.lstrip("-").isdigit() else -1

    @property
    def json_name(self) -> str:
        """Spark's JSON name: ``geometry(OGC:CRS84)``, ``geography(OGC:CRS84, SPHERICAL)``."""
        if self.kind == "geometry":
            return f"geometry({self.crs})"
        return f"geography({self.crs}, {self.algorithm})"


# The CRS Spark 4.3 maps to SRIDs (pyspark.sql.geo_utils); others keep their numeric tail.
_SRIDS = {"OGC:CRS84": 4326, "EPSG:3857": 3857, "SRID:0": 0, "SRID:ANY": -1}
MIXED_SRID_CRS = "SRID:ANY"


def _geo_type(name: str) -> GeoType | None:
    if m := _GEOMETRY.match(name):
        return GeoType("geometry", m.group(1) or "OGC:CRS84")
    if m := _GEOGRAPHY.match(name):
        crs = m.group(1) or m.group(3) or "OGC:CRS84"
        return GeoType("geography", crs, m.group(2) or m.group(4) or "SPHERICAL")
    return None


def is_geo(t: DataType) -> bool:
    """Whether ``t`` is, or holds at any depth, a geometry or geography."""
    if isinstance(t, GeoType):
        return True
    if isinstance(t, StructType):
        return any(is_geo(f.type) for f in t.fields)
    if isinstance(t, ArrayType):
        return is_geo(t.element_type)
    if isinstance(t, MapType):
        return is_geo(t.key_type) or is_geo(t.value_type)
    return False


DataType = PrimitiveType | DecimalType | GeoType | ArrayType | MapType | StructType


def parse_schema(schema_string: str) -> StructType:
    """Parse ``metaData.schemaString``.

    Raises:
        ValueError: the string is not a Spark struct schema.
    """
    obj = json.loads(schema_string)
    t = _type_from_json(obj)
    if not isinstance(t, StructType):
        raise ValueError("a table schema must be a struct")
    return t


def _type_from_json(obj: Any) -> DataType:
    if isinstance(obj, str):
        if m := _DECIMAL.match(obj):
            return DecimalType(int(m.group(1)), int(m.group(2)))
        if obj == "decimal":
            return DecimalType(10, 0)
        if obj in PRIMITIVE_NAMES:
            return PrimitiveType(obj)
        if (geo := _geo_type(obj)) is not None:
            return geo
        raise ValueError(f"unknown type {obj!r}")
    kind = obj.get("type")
    if kind == "struct":
        return StructType(
            tuple(
                StructField(
                    f["name"],
                    _type_from_json(f["type"]),
                    bool(f.get("nullable", True)),
                    dict(f.get("metadata") or {}),
                )
                for f in obj.get("fields", [])
            )
        )
    if kind == "array":
        return ArrayType(_type_from_json(obj["elementType"]), bool(obj.get("containsNull", True)))
    if kind == "map":
        return MapType(
            _type_from_json(obj["keyType"]),
            _type_from_json(obj["valueType"]),
            bool(obj.get("valueContainsNull", True)),
        )
    raise ValueError(f"unknown type {obj!r}")


def _type_to_json(t: DataType) -> Any:
    if isinstance(t, PrimitiveType):
        return t.name
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, GeoType):
        return t.json_name
    if isinstance(t, ArrayType):
        return {
            "type": "array",
            "elementType": _type_to_json(t.element_type),
            "containsNull": t.contains_null,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "keyType": _type_to_json(t.key_type),
            "valueType": _type_to_json(t.value_type),
            "valueContainsNull": t.value_contains_null,
        }
    return {
        "type": "struct",
        "fields": [
            {
                "name": f.name,
                "type": _type_to_json(f.type),
                "nullable": f.nullable,
                "metadata": f.metadata,
            }
            for f in t.fields
        ],
    }


def simple_string(t: DataType, primitive: Callable[[str], str] | None = None) -> str:
    """The short type notation (``decimal(10,2)``, ``array<long>``, ``struct<a:integer>``).

    Primitive types keep the protocol's names (``long``, ``integer``) unless ``primitive``
    maps them (Spark's ``simpleString`` uses ``bigint``, ``int``: see
    ``deltalog.commands.ddl.show``).
    """
    if isinstance(t, PrimitiveType):
        return t.name if primitive is None else primitive(t.name)
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, GeoType):  # Spark's simpleString: geometry(4326), geography(any)
        return f"{t.kind}({'any' if t.crs == MIXED_SRID_CRS else t.srid})"
    if isinstance(t, ArrayType):
        return f"array<{simple_string(t.element_type, primitive)}>"
    if isinstance(t, MapType):
        return (
            f"map<{simple_string(t.key_type, primitive)},{simple_string(t.value_type, primitive)}>"
        )
    inner = ",".join(f"{f.name}:{simple_string(f.type, primitive)}" for f in t.fields)
    return f"struct<{inner}>"


_ARROW_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
    "variant": pa.struct(
        [pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)]
    ),
}


def to_arrow(t: DataType) -> pa.DataType:
    """The Arrow type Spark's Arrow conversion uses for a Delta type; but geometry and
    geography values are their WKB bytes, as parquet stores them (Spark's own Arrow form,
    ``struct<srid, wkb>``, is made at the Spark boundary: :mod:`deltalog.geospatial`)."""
    if isinstance(t, PrimitiveType):
        return _ARROW_PRIMITIVES[t.name]
    if isinstance(t, GeoType):
        return pa.binary()
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, ArrayType):
        return pa.list_(pa.field("element", to_arrow(t.element_type), t.contains_null))
    if isinstance(t, MapType):
        return pa.map_(
            to_arrow(t.key_type), pa.field("value", to_arrow(t.value_type), t.value_contains_null)
        )
    return pa.struct([pa.field(f.name, to_arrow(f.type), f.nullable) for f in t.fields])


# -- Arrow -> Delta (the write side) -------------------------------------------------------------

COLUMN_MAPPING_METADATA_KEYS = frozenset(
    {
        "delta.columnMapping.id",
        "delta.columnMapping.physicalName",
        "delta.columnMapping.nested.ids",
        "parquet.field.id",
        "parquet.field.nested.ids",
    }
)

_FROM_ARROW_INTEGERS = {8: "byte", 16: "short", 32: "integer", 64: "long"}


def schema_from_arrow(schema: pa.Schema, table: str | None = None) -> StructType:
    """The Delta schema of Arrow data: the inverse of :meth:`StructType.to_arrow`.

    Signed integers, float32/64, (large) strings and binaries, booleans, date32, timestamps
    (with a zone -> ``timestamp``, without -> ``timestamp_ntz``, any unit), decimal128, (large)
    lists, structs, maps and null (``void``) are accepted; dictionary-encoded columns and the
    string/binary *view* layouts map to their value type. Arrow field metadata is not carried
    over (Spark's Arrow conversion drops it too). A GeoArrow ``geoarrow.wkb`` column is a
    ``geometry`` (or ``geography`` with ``"edges": "spherical"``) of its CRS.

    Raises:
        DeltaWriteError: ``DELTA_UNSUPPORTED_DATA_TYPE`` naming the column path and the Arrow
            type (unsigned integers, float16, date64, decimal256, time, duration, ...).
    """
    return StructType(
        tuple(StructField(f.name, _from_arrow(f.type, f.name, table), f.nullable) for f in schema)
    )


def _from_arrow(t: pa.DataType, path: str, table: str | None) -> DataType:
    types = pa.types
    if isinstance(t, pa.BaseExtensionType):
        geo = _geo_from_extension(t)
        if geo is None:
            raise errors.unsupported_data_type(path, str(t), table)
        return geo
    if types.is_dictionary(t):
        return _from_arrow(t.value_type, path, table)
    if types.is_signed_integer(t):
        return PrimitiveType(_FROM_ARROW_INTEGERS[t.bit_width])
    if types.is_float32(t):
        return PrimitiveType("float")
    if types.is_float64(t):
        return PrimitiveType("double")
    if types.is_boolean(t):
        return PrimitiveType("boolean")
    if types.is_string(t) or types.is_large_string(t) or types.is_string_view(t):
        return PrimitiveType("string")
    if types.is_binary(t) or types.is_large_binary(t) or types.is_binary_view(t):
        return PrimitiveType("binary")
    if types.is_date32(t):
        return PrimitiveType("date")
    if types.is_timestamp(t):
        return PrimitiveType("timestamp" if t.tz is not None else "timestamp_ntz")
    if types.is_decimal128(t) and 0 <= t.scale <= t.precision:
        return DecimalType(t.precision, t.scale)
    if types.is_null(t):
        return PrimitiveType("void")
    if types.is_list(t) or types.is_large_list(t):
        element = t.value_field
        return ArrayType(_from_arrow(element.type, f"{path}.element", table), element.nullable)
    if types.is_map(t):
        key, item = t.key_field, t.item_field
        return MapType(
            _from_arrow(key.type, f"{path}.key", table),
            _from_arrow(item.type, f"{path}.value", table),
            item.nullable,
        )
    if types.is_struct(t):
        return StructType(
            tuple(
                StructField(
                    child.name,
                    _from_arrow(child.type, f"{path}.{child.name}", table),
                    child.nullable,
                )
                for child in (t.field(i) for i in range(t.num_fields))
            )
        )
    raise errors.unsupported_data_type(path, str(t), table)


def _geo_from_extension(t: pa.BaseExtensionType) -> GeoType | None:
    """The type of a GeoArrow ``geoarrow.wkb`` column (its JSON metadata: ``crs``, as a string
    (PROJJSON and other forms are not taken), ``edges``: ``spherical`` for a geography)."""
    if t.extension_name != "geoarrow.wkb" or not hasattr(t, "__arrow_ext_serialize__"):
        return None
    raw = t.__arrow_ext_serialize__()
    try:
        meta = json.loads(raw) if raw else {}
    except ValueError:
        return None
    crs = meta.get("crs") or "OGC:CRS84"
    if not isinstance(crs, str) or not re.fullmatch(_CRS, crs):
        return None
    edges = meta.get("edges", "planar")
    if edges == "planar":
        return GeoType("geometry", crs)
    return GeoType("geography", crs, str(edges).upper())


# -- walking the type tree -----------------------------------------------------------------------


def _same(t: ArrayType | MapType) -> ArrayType | MapType:
    return t


def map_type(
    t: DataType,
    field: Callable[[StructField], StructField],
    container: Callable[[ArrayType | MapType], ArrayType | MapType] = _same,
) -> DataType:
    """``t`` rebuilt with every struct field, at every nesting level, passed through ``field``
    and then its type mapped (so ``field`` sees the fields in schema order, a parent before
    its children), and every array and map, once its children are mapped, through
    ``container``."""
    if isinstance(t, StructType):
        return StructType(tuple(_map_field(f, field, container) for f in t.fields))
    if isinstance(t, ArrayType):
        element = map_type(t.element_type, field, container)
        return container(ArrayType(element, t.contains_null))
    if isinstance(t, MapType):
        key = map_type(t.key_type, field, container)
        value = map_type(t.value_type, field, container)
        return container(MapType(key, value, t.value_contains_null))
    return t


def _map_field(
    f: StructField,
    field: Callable[[StructField], StructField],
    container: Callable[[ArrayType | MapType], ArrayType | MapType],
) -> StructField:
    mapped = field(f)
    return replace(mapped, type=map_type(mapped.type, field, container))


def map_fields(
    schema: StructType,
    field: Callable[[StructField], StructField],
    container: Callable[[ArrayType | MapType], ArrayType | MapType] = _same,
) -> StructType:
    """:func:`map_type` of a struct, typed as one."""
    result = map_type(schema, field, container)
    assert isinstance(result, StructType)
    return result


def explode(schema: StructType) -> Iterator[tuple[tuple[str, ...], StructField]]:
    """Every (path, field) of ``schema``, parents before children; paths through arrays and maps
    use ``element``, ``key`` and ``value`` (the reference's ``SchemaMergingUtils.explode``)."""
    yield from _explode(schema, ())


def _explode(t: DataType, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], StructField]]:
    if isinstance(t, StructType):
        for f in t.fields:
            path = (*prefix, f.name)
            yield path, f
            yield from _explode(f.type, path)
    elif isinstance(t, ArrayType):
        yield from _explode(t.element_type, (*prefix, "element"))
    elif isinstance(t, MapType):
        yield from _explode(t.key_type, (*prefix, "key"))
        yield from _explode(t.value_type, (*prefix, "value"))


# -- schema rewrites ------------------------------------------------------------------------------


def as_nullable(schema: StructType) -> StructType:
    """``schema`` with every field, array element and map value nullable, recursively (what a
    DataFrame write stores, as Spark's ``asNullable``); field metadata such as comments is kept."""
    return map_fields(schema, lambda f: replace(f, nullable=True), _nullable_container)


def _nullable_container(t: ArrayType | MapType) -> ArrayType | MapType:
    if isinstance(t, ArrayType):
        return replace(t, contains_null=True)
    return replace(t, value_contains_null=True)


def drop_column_mapping_metadata(schema: StructType) -> StructType:
    """``schema`` without column-mapping field metadata (ids, physical names, nested ids and the
    parquet field-id keys), at every nesting level: a DataFrame's schema must not bring its own."""
    return _without_keys(schema, COLUMN_MAPPING_METADATA_KEYS)


def _without_keys(schema: StructType, keys: frozenset[str]) -> StructType:
    """``schema`` with the field metadata ``keys`` removed at every nesting level."""

    def strip(f: StructField) -> StructField:
        return replace(f, metadata={k: v for k, v in f.metadata.items() if k not in keys})

    return map_fields(schema, strip)


# Field metadata of writer features that a read's schema does not show (delta-spark's
# removeInternalWriterMetadata: generated and identity columns, top level only).
_WRITER_ONLY_KEYS = frozenset(
    {
        "delta.generationExpression",
        "delta.identity.start",
        "delta.identity.step",
        "delta.identity.highWaterMark",
        "delta.identity.allowExplicitInsert",
    }
)


def read_schema(schema: StructType) -> StructType:
    """The schema a read of the table shows (delta-spark's ``removeInternalWriterMetadata``
    then ``removeInternalDeltaMetadata``): no generation or identity keys, no column-mapping
    metadata, no ``delta.typeChanges``."""
    internal = _without_keys(schema, COLUMN_MAPPING_METADATA_KEYS | {"delta.typeChanges"})
    return StructType(
        tuple(
            StructField(
                f.name,
                f.type,
                f.nullable,
                {k: v for k, v in f.metadata.items() if k not in _WRITER_ONLY_KEYS},
            )
            for f in internal.fields
        )
    )
