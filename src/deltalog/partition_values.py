"""Partition values: the strings of ``add.partitionValues`` typed by the table schema
(PROTOCOL.md "Partition Value Serialization")."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from deltalog import errors
from deltalog.schema import DataType, DecimalType, PrimitiveType, StructField, StructType, to_arrow
from deltalog.timestamps import parse_datetime

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def lookup_partition_value(values: dict[str, str | None], key: str) -> str | None:
    """The serialized value of partition column ``key`` (exact name first, then ignoring case,
    as Spark resolves column names)."""
    if key in values:
        return values[key]
    lowered = key.lower()
    return next((v for k, v in values.items() if k.lower() == lowered), None)


def parse_partition_value(raw: str | None, data_type: DataType) -> Any:
    """The typed value of one serialized partition value (``None`` and ``""`` are null).

    Timestamps without an offset are read as UTC (as Kernel and delta-rs do); ISO-8601 values
    with ``Z`` or an offset are honoured. Timestamps come back as aware UTC datetimes,
    ``timestamp_ntz`` as naive ones.

    Raises:
        ValueError: the string does not parse as ``data_type``.
    """
    if raw is None or raw == "":
        return None
    if isinstance(data_type, DecimalType):
        # Decimals reach 38 digits; the default context (28) would round or refuse them.
        context = decimal.Context(prec=max(data_type.precision, len(raw)) + 2)
        return decimal.Decimal(raw).quantize(
            decimal.Decimal(1).scaleb(-data_type.scale), context=context
        )
    if not isinstance(data_type, PrimitiveType):
        raise ValueError(f"partition columns must be primitive, not {data_type}")
    name = data_type.name
    if name == "string":
        return raw
    if name in ("long", "integer", "short", "byte"):
        return int(raw)
    if name in ("float", "double"):
        return float(raw)
    if name == "boolean":
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"not a boolean: {raw!r}")
        return raw.lower() == "true"
    if name == "date":
        return dt.date.fromisoformat(raw[:10])
    if name == "timestamp":
        value = parse_datetime(raw)
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if name == "timestamp_ntz":
        return parse_datetime(raw).replace(tzinfo=None)
    if name == "binary":
        return raw.encode("utf-8")
    raise ValueError(f"unsupported partition column type {name}")


def typed_partition_column(
    field: StructField,
    raw: Sequence[Mapping[str, str | None]],
    *,
    column_mapping: bool,
    table_root: str,
) -> pa.Array:
    """One partition column, typed, from each file's serialized ``partitionValues`` (keyed by
    the physical name under column mapping).

    Raises:
        InvalidTableError: a value does not parse as the column's type.
    """
    key = field.physical_name if column_mapping else field.name
    try:
        values = [
            parse_partition_value(lookup_partition_value(dict(pv), key), field.type) for pv in raw
        ]
    except ValueError as e:
        raise errors.InvalidTableError(
            "DELTA_INVALID_PARTITION_VALUE",
            f"a partition value of column {field.name} does not parse as {field.type}: {e}.",
            table=table_root,
        ) from None
    return pa.array(values, to_arrow(field.type))


def typed_partition_values(
    schema: StructType,
    partition_columns: Sequence[str],
    raw: Sequence[Mapping[str, str | None]],
    *,
    column_mapping: bool,
    table_root: str,
) -> dict[str, pa.Array]:
    """:func:`typed_partition_column` for every partition column, by logical name."""
    columns: dict[str, pa.Array] = {}
    for name in partition_columns:
        field = schema.field(name)
        columns[field.name] = typed_partition_column(
            field, raw, column_mapping=column_mapping, table_root=table_root
        )
    return columns
