"""Type widening (PROTOCOL.md "Type Widening"): which type changes a table may take, which of
them schema evolution applies by itself, and the ``delta.typeChanges`` field metadata that
records them.

Follows the reference's ``TypeWidening`` (the supported changes), ``TypeWideningMode`` (the
subset automatic schema evolution applies, by ``typeWidening.allowAutomaticWidening``) and
``TypeWideningMetadata.addTypeWideningMetadata`` (what is recorded, and where). Every writer
that merges a schema (DataFrame writes, ``write_table``, MERGE schema evolution) and ALTER
COLUMN TYPE go through :func:`record_type_changes`; merging asks :class:`WideningMode`. Pure:
no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from deltalog import errors
from deltalog.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    simple_string,
)

TYPE_CHANGES_KEY = "delta.typeChanges"
ENABLE_KEY = "delta.enableTypeWidening"
ALLOW_AUTOMATIC_WIDENING_CONF = "spark.databricks.delta.typeWidening.allowAutomaticWidening"
AUTOMATIC_MODES = ("never", "same_family_type", "always")
PREVIEW_FEATURE = "typeWidening-preview"

# Integral types by size (the reference's ``defaultSize`` order).
_INTEGRAL = ("byte", "short", "integer", "long")
# The decimal each integral type fits in (Spark's ``DecimalType.forType``); byte, short and
# integer are all INT32 in parquet, so they widen to decimal(10,0) and wider.
_INTEGRAL_DECIMAL = {"byte": (10, 0), "short": (10, 0), "integer": (10, 0), "long": (20, 0)}

Atomic = PrimitiveType | DecimalType


def is_type_change_supported(old: DataType, new: DataType) -> bool:
    """Whether the protocol allows widening ``old`` to ``new`` (both atomic; equal types too):
    byte → short → integer → long; float → double; date → timestamp_ntz; byte, short, integer
    → double; decimal → decimal ``(p + k1, s + k2)`` with ``k1 >= k2 >= 0``; byte, short,
    integer → decimal(10,0) and wider; long → decimal(20,0) and wider."""
    if old == new:
        return True
    if isinstance(old, PrimitiveType) and isinstance(new, PrimitiveType):
        a, b = old.name, new.name
        if a in _INTEGRAL and b in _INTEGRAL:
            return _INTEGRAL.index(a) < _INTEGRAL.index(b)
        if b == "double":
            return a in ("float", "byte", "short", "integer")
        return a == "date" and b == "timestamp_ntz"
    if isinstance(new, DecimalType):
        if isinstance(old, DecimalType):
            return _wider_decimal(new, old.precision, old.scale)
        if isinstance(old, PrimitiveType) and old.name in _INTEGRAL:
            return _wider_decimal(new, *_INTEGRAL_DECIMAL[old.name])
    return False


def _wider_decimal(new: DecimalType, precision: int, scale: int) -> bool:
    k1, k2 = new.precision - precision, new.scale - scale
    return k1 >= k2 >= 0


def is_same_family_change(old: DataType, new: DataType) -> bool:
    """The supported changes schema evolution applied before Delta 4.1 (``same_family_type``):
    within the integers, float → double, decimal → wider decimal, date → timestamp_ntz; never
    an integer to double or decimal."""
    if not is_type_change_supported(old, new):
        return False
    if isinstance(old, DecimalType):
        return isinstance(new, DecimalType)
    if isinstance(old, PrimitiveType) and isinstance(new, PrimitiveType):
        if old.name in _INTEGRAL:
            return new.name in _INTEGRAL
        return True
    return False


def is_iceberg_compatible_change(old: DataType, new: DataType) -> bool:
    """The supported changes Iceberg v1/v2 readers follow: within the integers, float →
    double, a decimal's precision (same scale)."""
    if old == new:
        return True
    if not is_type_change_supported(old, new):
        return False
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return old.scale == new.scale
    if isinstance(old, PrimitiveType) and isinstance(new, PrimitiveType):
        return (old.name in _INTEGRAL and new.name in _INTEGRAL) or (
            old.name == "float" and new.name == "double"
        )
    return False


# -- the table ------------------------------------------------------------------------------


def is_enabled(configuration: Mapping[str, str]) -> bool:
    """Whether ``delta.enableTypeWidening`` is true on the table (every commit setting it adds
    ``typeWidening`` to the protocol, so the feature is there too)."""
    return configuration.get(ENABLE_KEY, "").strip().lower() == "true"


def iceberg_enabled(configuration: Mapping[str, str]) -> bool:
    """UniForm Iceberg (``delta.universalFormat.enabledFormats`` lists ``iceberg``)."""
    formats = configuration.get("delta.universalFormat.enabledFormats", "")
    return "iceberg" in (f.strip().lower() for f in formats.split(","))


@dataclass(frozen=True, slots=True)
class WideningMode:
    """Which type changes schema evolution applies by itself (the reference's
    ``TypeWideningMode.TypeEvolution``, or ``NoTypeWidening`` with ``automatic="never"``).

    Attributes:
        automatic: ``always`` (every supported change, the default since Delta 4.1),
            ``same_family_type`` (:func:`is_same_family_change`) or ``never``.
        iceberg_only: also restricted to :func:`is_iceberg_compatible_change` (UniForm
            Iceberg tables).
    """

    automatic: str = "never"
    iceberg_only: bool = False

    def widened(self, current: DataType, update: DataType) -> DataType | None:
        """``update`` when ``current`` may be widened to it, else ``None``."""
        if not isinstance(current, Atomic) or not isinstance(update, Atomic):
            return None
        if _is_void(current) or _is_void(update):
            return None
        if self.automatic == "always":
            allowed = is_type_change_supported(current, update)
        elif self.automatic == "same_family_type":
            allowed = is_same_family_change(current, update)
        else:
            return None
        if allowed and self.iceberg_only:
            allowed = is_iceberg_compatible_change(current, update)
        return update if allowed else None


NO_WIDENING = WideningMode()


def widening_mode(
    configuration: Mapping[str, str], automatic: str = "always", table: str | None = None
) -> WideningMode:
    """The mode schema evolution uses on a table with ``configuration``: none unless the table
    enables type widening; ``automatic`` is ``typeWidening.allowAutomaticWidening``.

    Raises:
        InvalidArgumentError: ``automatic`` is not one of never, same_family_type, always.
    """
    normalized = automatic.strip().lower()
    if normalized not in AUTOMATIC_MODES:
        raise errors.InvalidArgumentError(
            "DELTA_ILLEGAL_OPTION",
            f"Invalid value '{automatic}' for {ALLOW_AUTOMATIC_WIDENING_CONF}: must be one of "
            f"{', '.join(m.upper() for m in AUTOMATIC_MODES)}.",
            table=table,
        )
    if not is_enabled(configuration):
        return NO_WIDENING
    return WideningMode(normalized, iceberg_enabled(configuration))


def _is_void(t: DataType) -> bool:
    return isinstance(t, PrimitiveType) and t.name == "void"


# -- delta.typeChanges ----------------------------------------------------------------------


def record_type_changes(
    schema: StructType, old: StructType, *, preview_version: int | None = None
) -> StructType:
    """``schema`` with each field whose type (or a type inside its arrays and maps) was widened
    from ``old`` carrying the change appended to its ``delta.typeChanges``: ``{"fromType",
    "toType"}`` plus ``fieldPath`` (``element``/``key``/``value`` steps) inside arrays and maps,
    and ``tableVersion`` (``preview_version``, the commit's first attempted version) on tables
    with ``typeWidening-preview``. Fields are matched by name ignoring case; new fields and
    nested structs' own fields are handled at their own level. Call only on tables with type
    widening enabled (the reference records nothing otherwise)."""
    return _record_struct(schema, old, preview_version)


def _record_struct(schema: StructType, old: StructType, version: int | None) -> StructType:
    before = {f.name.lower(): f for f in old.fields}
    fields = []
    for f in schema.fields:
        prior = before.get(f.name.lower())
        fields.append(f if prior is None else record_field_changes(f, prior.type, version))
    result = StructType(tuple(fields))
    return schema if result == schema else result


def record_field_changes(f: StructField, old: DataType, version: int | None) -> StructField:
    """:func:`record_type_changes` of one field whose type was ``old``."""
    typ = _record_nested(f.type, old, version)
    changes = _collect(old, f.type, ())
    if not changes and typ is f.type:
        return f
    metadata: dict[str, Any] = dict(f.metadata)
    if changes:
        entries = []
        for path, from_type, to_type in changes:
            entry: dict[str, Any] = {}
            if version is not None:
                entry["tableVersion"] = version
            entry["fromType"] = simple_string(from_type)
            entry["toType"] = simple_string(to_type)
            if path:
                entry["fieldPath"] = ".".join(path)
            entries.append(entry)
        metadata[TYPE_CHANGES_KEY] = [*metadata.get(TYPE_CHANGES_KEY, []), *entries]
    return replace(f, type=typ, metadata=metadata)


def _record_nested(t: DataType, old: DataType, version: int | None) -> DataType:
    """``t`` with the fields of structs nested in it (through arrays and maps) recorded."""
    if isinstance(t, StructType) and isinstance(old, StructType):
        return _record_struct(t, old, version)
    if isinstance(t, ArrayType) and isinstance(old, ArrayType):
        element = _record_nested(t.element_type, old.element_type, version)
        return t if element is t.element_type else replace(t, element_type=element)
    if isinstance(t, MapType) and isinstance(old, MapType):
        key = _record_nested(t.key_type, old.key_type, version)
        value = _record_nested(t.value_type, old.value_type, version)
        if key is t.key_type and value is t.value_type:
            return t
        return replace(t, key_type=key, value_type=value)
    return t


def _collect(
    old: DataType, new: DataType, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], DataType, DataType]]:
    """The atomic widenings from ``old`` to ``new`` inside one field: through arrays and maps,
    not into nested structs (their fields record their own)."""
    if isinstance(old, MapType) and isinstance(new, MapType):
        return [
            *_collect(old.key_type, new.key_type, (*path, "key")),
            *_collect(old.value_type, new.value_type, (*path, "value")),
        ]
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _collect(old.element_type, new.element_type, (*path, "element"))
    if (
        isinstance(old, Atomic)
        and isinstance(new, Atomic)
        and old != new
        and not _is_void(old)
        and is_type_change_supported(old, new)
    ):
        return [(path, old, new)]
    return []
