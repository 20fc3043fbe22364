"""Partition pruning and data skipping: which of a snapshot's files may hold rows matching a
predicate.

Partition columns are evaluated exactly on each file's typed partition values (a file's rows
all share them); other columns on the file's statistics (``numRecords``, ``minValues``,
``maxValues``, ``nullCount``: PROTOCOL.md "Per-file Statistics"). Every answer is conservative:
a file is dropped only when no row of it can satisfy the predicate, so the exact filter applied
to the rows afterwards gives the same result as a full scan. Missing statistics, types without
a safe ordering and anything the predicate model calls opaque keep the file.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from deltalog.partition_values import typed_partition_column
from deltalog.scan.predicate import (
    And,
    Comparison,
    In,
    IsNull,
    Literal,
    Or,
    Predicate,
    PredicateSyntaxError,
    parse_predicate,
    push_down_not,
)
from deltalog.schema import DecimalType, PrimitiveType, StructField, StructType, to_arrow
from deltalog.timestamps import parse_datetime
from deltalog.timestamps import time_zone as parse_time_zone

_INTEGRAL = {"byte", "short", "integer", "long"}
_FLOATING = {"float", "double"}
_TIMESTAMPS = {"timestamp", "timestamp_ntz"}
# Statistics of these types are compared; others (binary, decimal, nested...) keep the file.
_STATS_TYPES = _INTEGRAL | _FLOATING | _TIMESTAMPS | {"string", "date", "boolean"}
# Timestamp statistics are truncated to milliseconds, so a maximum may be up to 1 ms low.
_MAX_TRUNCATION = dt.timedelta(milliseconds=1)
# Time zones run from UTC-12:00 to UTC+14:00: a wall-clock time names an instant this much
# earlier or later than the same time read in UTC.
_EARLIEST_OFFSET = dt.timedelta(hours=14)
_LATEST_OFFSET = dt.timedelta(hours=12)


def skipping_predicate(where: str | None) -> Predicate | None:
    """The predicate of a SQL filter, or ``None`` when there is none or it is outside the subset
    skipping understands (then every file is kept and only the row filter applies)."""
    if not where or not where.strip():
        return None
    try:
        return push_down_not(parse_predicate(where))
    except PredicateSyntaxError:
        return None


def files_matching(
    files: pa.Table,
    schema: StructType,
    partition_columns: tuple[str, ...],
    predicate: Predicate | None,
    *,
    column_mapping: bool = False,
    time_zone: str | None = None,
    table_root: str = "",
) -> pa.Table:
    """The rows of ``files`` (live ``add`` actions) that may hold rows matching ``predicate``.

    ``time_zone`` interprets timestamp literals without an offset (Spark's session time zone);
    ``None`` when the caller does not know it: such a literal then stands for every instant it
    can name (UTC-12:00 to UTC+14:00), so no file Spark would select is dropped.
    ``table_root`` names the table in errors.

    Raises:
        InvalidTableError: a partition value does not parse as its column's type.
    """
    if predicate is None or files.num_rows == 0:
        return files
    context = _Context(files, schema, partition_columns, column_mapping, time_zone, table_root)
    return files.filter(context.evaluate(push_down_not(predicate)))


class _Context:
    """Evaluates a NOT-free predicate to a per-file "may match" mask, parsing each column's
    partition values or statistics once."""

    def __init__(
        self,
        files: pa.Table,
        schema: StructType,
        partition_columns: tuple[str, ...],
        column_mapping: bool,
        time_zone: str | None,
        table_root: str,
    ) -> None:
        self._files = files
        self._table_root = table_root
        self._fields = {f.name.lower(): f for f in schema.fields}
        self._partitions = {c.lower() for c in partition_columns}
        self._column_mapping = column_mapping
        self._zone = None if time_zone is None else parse_time_zone(time_zone)
        self._partition_cache: dict[str, pa.Array] = {}
        self._stats_cache: dict[str, pa.Table | None] = {}
        self._all = pa.array([True] * files.num_rows)
        self._none = pa.array([False] * files.num_rows)

    def evaluate(self, p: Predicate) -> pa.Array:
        if isinstance(p, And):
            return pc.and_(self.evaluate(p.left), self.evaluate(p.right))
        if isinstance(p, Or):
            return pc.or_(self.evaluate(p.left), self.evaluate(p.right))
        if isinstance(p, (Comparison, In, IsNull)):
            field = self._fields.get(p.column.lower())
            if field is None:
                return self._all
            if field.name.lower() in self._partitions:
                return self._on_partition(field, p)
            return self._on_stats(field, p)
        return self._all

    # -- partition columns: exact ------------------------------------------------------------

    def _on_partition(self, field: StructField, p: Comparison | In | IsNull) -> pa.Array:
        values = self._partition_values(field)
        if isinstance(p, IsNull):
            return pc.is_valid(values) if p.negated else pc.is_null(values)
        literals = [p.literal] if isinstance(p, Comparison) else list(p.values)
        scalars = [_scalar(lit, field, self._zone) for lit in literals]
        if any(s is _UNKNOWN for s in scalars):
            return self._all
        if isinstance(p, In):
            present = [s for s in scalars if s is not None]
            if p.negated and len(present) < len(scalars):
                return self._none  # x NOT IN (..., NULL) is never true
            if any(isinstance(s, _Range) for s in present):
                if p.negated:
                    return pc.fill_null(pc.is_valid(values), False)
                mask = self._none
                for s in present:
                    mask = pc.or_(mask, pc.fill_null(_compare(values, "=", s), False))
                return mask
            hit = pc.is_in(values, value_set=pa.array(present, values.type))
            hit = pc.invert(hit) if p.negated else hit
            return pc.and_(hit, pc.is_valid(values))
        if scalars[0] is None:
            return self._none  # a comparison with NULL is never true
        mask = pc.fill_null(_compare(values, p.op, scalars[0]), False)
        if _type_name(field) in _FLOATING:
            # Spark orders NaN above every number and equal to itself; IEEE comparisons say
            # false. Keeping NaN partitions is safe: the exact decision is Spark's.
            mask = pc.or_(mask, pc.fill_null(pc.is_nan(values), False))
        return mask

    def _partition_values(self, field: StructField) -> pa.Array:
        cached = self._partition_cache.get(field.name)
        if cached is None:
            raw = [dict(pv or []) for pv in self._files["partitionValues"].to_pylist()]
            cached = typed_partition_column(
                field, raw, column_mapping=self._column_mapping, table_root=self._table_root
            )
            self._partition_cache[field.name] = cached
        return cached

    # -- other columns: statistics -------------------------------------------------------------

    def _on_stats(self, field: StructField, p: Comparison | In | IsNull) -> pa.Array:
        stats = self._stats(field)
        if stats is None:
            return self._all
        nulls, records = stats["nullCount"], stats["numRecords"]
        if isinstance(p, IsNull):
            if p.negated:
                return pc.fill_null(pc.less(nulls, records), True)
            return pc.fill_null(pc.greater(nulls, 0), True)
        literals = [p.literal] if isinstance(p, Comparison) else list(p.values)
        if isinstance(p, In) and p.negated:
            return self._all
        scalars = [_scalar(lit, field, self._zone) for lit in literals]
        if any(s is _UNKNOWN for s in scalars):
            return self._all
        if not [s for s in scalars if s is not None]:
            return self._none
        op = p.op if isinstance(p, Comparison) else "="
        if _type_name(field) in _FLOATING and op in (">", ">=", "!="):
            return self._all  # NaN sorts above every number and is not in the statistics
        lo, hi = stats["min"], stats["max"]
        mask = self._none
        for s in scalars:
            if s is not None:
                mask = pc.or_(mask, pc.fill_null(_may_hold(op, lo, hi, s), True))
        all_null = pc.fill_null(pc.equal(nulls, records), False)
        return pc.and_(mask, pc.invert(all_null))

    def _stats(self, field: StructField) -> pa.Table | None:
        if field.name in self._stats_cache:
            return self._stats_cache[field.name]
        parsed = None
        if _type_name(field) in _STATS_TYPES and "stats" in self._files.column_names:
            try:
                parsed = _parse_stats(self._files["stats"], field, self._column_mapping)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                parsed = None  # statistics we cannot read decide nothing
        self._stats_cache[field.name] = parsed
        return parsed


_UNKNOWN = object()

COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


@dataclass(frozen=True, slots=True)
class _Range:
    """A literal whose instant depends on a time zone the caller does not know: it is
    somewhere in [lo, hi]."""

    lo: pa.Scalar
    hi: pa.Scalar


def _compare(values: pa.Array, op: str, v: pa.Scalar | _Range) -> pa.Array:
    """``values op v`` exactly, or, for a :class:`_Range`, whether it may hold."""
    if not isinstance(v, _Range):
        return COMPARE[op](values, v)
    if op == "=":
        return pc.and_kleene(pc.greater_equal(values, v.lo), pc.less_equal(values, v.hi))
    if op == "!=":
        return pc.is_valid(values)
    return COMPARE[op](values, v.hi if op in ("<", "<=") else v.lo)


def _may_hold(op: str, lo: pa.Array, hi: pa.Array, v: pa.Scalar | _Range) -> pa.Array:
    """Whether some value in [lo, hi] may satisfy ``value op v`` (null where unknown)."""
    if isinstance(v, _Range):
        if op == "!=":
            return pa.array([True] * len(lo))
        if op == "=":
            return pc.and_kleene(pc.less_equal(lo, v.hi), pc.greater_equal(hi, v.lo))
        return _may_hold(op, lo, hi, v.hi if op in ("<", "<=") else v.lo)
    if op == "=":
        return pc.and_kleene(pc.less_equal(lo, v), pc.greater_equal(hi, v))
    if op == "!=":
        return pc.invert(pc.and_kleene(pc.equal(lo, v), pc.equal(hi, v)))
    if op in ("<", "<="):
        return COMPARE[op](lo, v)
    return COMPARE[op](hi, v)


def _type_name(field: StructField) -> str:
    return field.type.name if isinstance(field.type, PrimitiveType) else ""


def _scalar(lit: Literal, field: StructField, zone: dt.tzinfo | None) -> Any:
    """``lit`` as a scalar of the column's Arrow type (a :class:`_Range` for a timestamp
    literal without an offset when ``zone`` is unknown); ``None`` for NULL; ``_UNKNOWN`` when
    Spark's coercion of this pair is not one skipping reproduces exactly."""
    if lit.kind == "null":
        return None
    name = _type_name(field)
    value: Any = _UNKNOWN
    if isinstance(field.type, DecimalType):
        return _UNKNOWN
    if name in _INTEGRAL and lit.kind == "int":
        value = lit.value
    elif name in _INTEGRAL and lit.kind == "decimal" and lit.value == lit.value.to_integral():
        value = int(lit.value)
    elif name in _FLOATING and lit.kind in ("int", "float", "decimal"):
        value = float(lit.value)
    elif (name, lit.kind) in (("string", "string"), ("boolean", "bool")):
        value = lit.value
    elif name == "date" and lit.kind in ("date", "string"):
        value = _as_date(lit.value)
    elif name in _TIMESTAMPS and lit.kind in ("timestamp", "string", "date"):
        value = _as_timestamp(lit.value, name == "timestamp", zone)
    if value is _UNKNOWN or value is None:
        return _UNKNOWN
    try:
        if isinstance(value, tuple):
            lo, hi = value
            return _Range(pa.scalar(lo, to_arrow(field.type)), pa.scalar(hi, to_arrow(field.type)))
        return pa.scalar(value, to_arrow(field.type))
    except (pa.ArrowInvalid, OverflowError, TypeError):
        return _UNKNOWN


def _as_date(value: Any) -> dt.date | None:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip())
    except ValueError:
        return None


def _as_timestamp(
    value: Any, utc: bool, zone: dt.tzinfo | None
) -> dt.datetime | tuple[dt.datetime, dt.datetime] | None:
    """The instant ``value`` names in UTC (naive for ``timestamp_ntz``); for text without an
    offset and no known ``zone``, the earliest and latest instants it names in any zone."""
    if isinstance(value, dt.datetime):
        ts = value
    elif isinstance(value, dt.date):
        ts = dt.datetime(value.year, value.month, value.day)
    else:
        try:
            ts = parse_datetime(str(value))
        except ValueError:
            return None
    if not utc:
        return ts.replace(tzinfo=None)
    if ts.tzinfo is None and zone is None:
        wall = ts.replace(tzinfo=dt.UTC)
        return wall - _EARLIEST_OFFSET, wall + _LATEST_OFFSET
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=zone)
    return ts.astimezone(dt.UTC)


def _parse_stats(stats: pa.ChunkedArray, field: StructField, column_mapping: bool) -> pa.Table:
    """``min``, ``max``, ``nullCount`` and ``numRecords`` of one column, one row per file."""
    name = field.physical_name if column_mapping else field.name
    value_type = to_arrow(field.type)
    text_type = pa.string() if _type_name(field) in _TIMESTAMPS | {"date"} else value_type
    json_type = pa.struct([pa.field(name, text_type)])
    schema = pa.schema(
        [
            ("numRecords", pa.int64()),
            ("minValues", json_type),
            ("maxValues", json_type),
            ("nullCount", pa.struct([pa.field(name, pa.int64())])),
        ]
    )
    lines = pc.fill_null(stats, "{}").to_pylist()
    data = ("\n".join(line or "{}" for line in lines) + "\n").encode("utf-8")
    table = pa_json.read_json(
        io.BytesIO(data),
        read_options=pa_json.ReadOptions(block_size=max(len(data) + 1, 1 << 20)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"
        ),
    )
    if table.num_rows != len(lines):
        raise pa.ArrowInvalid("statistics rows do not line up with files")
    lo = pc.struct_field(table["minValues"], name)
    hi = pc.struct_field(table["maxValues"], name)
    if text_type != value_type:
        lo, hi = _cast_text(lo, value_type), _cast_text(hi, value_type)
        if _type_name(field) in _TIMESTAMPS:
            hi = pc.add(hi, pa.scalar(_MAX_TRUNCATION, pa.duration("us")))
    return pa.table(
        {
            "min": lo,
            "max": hi,
            "nullCount": pc.struct_field(table["nullCount"], name),
            "numRecords": table["numRecords"],
        }
    )


def _cast_text(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Date and timestamp statistics, which the log stores as ISO-8601 strings."""
    if pa.types.is_timestamp(target):
        # "2024-01-01T00:00:00.000Z" (timestamp) or without the zone (timestamp_ntz).
        text = pc.replace_substring_regex(values, r"(Z|[+-]00:?00)$", "")
        return pc.cast(pc.cast(text, pa.timestamp("us")), target)
    return pc.cast(values, target)


def prune_where(
    files: pa.Table,
    schema: StructType,
    partition_columns: tuple[str, ...],
    where: str | None,
    *,
    column_mapping: bool = False,
    time_zone: str = "UTC",
    table_root: str = "",
) -> pa.Table:
    """:func:`files_matching` for a SQL filter text (unparseable text keeps every file)."""
    return files_matching(
        files,
        schema,
        partition_columns,
        skipping_predicate(where),
        column_mapping=column_mapping,
        time_zone=time_zone,
        table_root=table_root,
    )
