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
import json
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from deltalog.partition_values import typed_partition_column
from deltalog.scan.coercion import UNKNOWN, Range, coerce, comparison_type
from deltalog.scan.predicate import (
    And,
    Comparison,
    In,
    IsNull,
    Or,
    Predicate,
    PredicateSyntaxError,
    parse_predicate,
    push_down_not,
)
from deltalog.schema import PrimitiveType, StructField, StructType, compares_by_bytes, to_arrow
from deltalog.timestamps import time_zone as parse_time_zone

_INTEGRAL = {"byte", "short", "integer", "long"}
_FLOATING = {"float", "double"}
_TIMESTAMPS = {"timestamp", "timestamp_ntz"}
# Statistics of these types are compared; others (binary, decimal, nested...) keep the file.
_STATS_TYPES = _INTEGRAL | _FLOATING | _TIMESTAMPS | {"string", "date", "boolean"}
# Timestamp statistics are truncated to milliseconds (delta-spark, delta-rs and our writer floor
# them), so a maximum may be up to 1 ms low; a floored minimum is still a lower bound.
_MAX_TRUNCATION = dt.timedelta(milliseconds=1)


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
    string_prefix_length: int = 0,
) -> pa.Table:
    """The rows of ``files`` (live ``add`` actions) that may hold rows matching ``predicate``.

    ``time_zone`` interprets timestamp literals without an offset (Spark's session time zone);
    ``None`` when the caller does not know it: such a literal then stands for every instant it
    can name (UTC-12:00 to UTC+14:00), so no file Spark would select is dropped.
    ``table_root`` names the table in errors. ``string_prefix_length``: the table's
    ``delta.dataSkippingStringPrefixLength`` (see :func:`exact_string_max_below`); a string
    maximum shorter than it was not cut, so it bounds its file exactly (0: any may be cut).

    Raises:
        InvalidTableError: a partition value does not parse as its column's type.
    """
    if predicate is None or files.num_rows == 0:
        return files
    context = _Context(files, schema, partition_columns, column_mapping, time_zone, table_root)
    context.exact_string_max_below = exact_string_max_below(string_prefix_length)
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
        self.exact_string_max_below = 0  # string maxima shorter than this are exact
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
            # Bounds and partition values order by bytes; a collated (UTF8_LCASE) or CHAR(n)
            # column compares otherwise in Spark, so they decide nothing for it.
            if field is None or (not isinstance(p, IsNull) and not compares_by_bytes(field)):
                return self._all
            if field.name.lower() in self._partitions:
                return self._on_partition(field, p)
            return self._on_stats(field, p)
        return self._all

    def _scalars(self, field: StructField, p: Comparison | In) -> list[Any] | None:
        """The literals of ``p`` as compared with ``field`` (``None`` for NULL), or ``None``
        when any is :data:`UNKNOWN` or a NaN (which orders above every number in Spark: no
        bound decides it)."""
        literals = [p.literal] if isinstance(p, Comparison) else list(p.values)
        scalars = [coerce(lit, to_arrow(field.type), self._zone) for lit in literals]
        if any(s is UNKNOWN or _is_nan(s) for s in scalars):
            return None
        return scalars

    # -- partition columns: exact ------------------------------------------------------------

    def _on_partition(self, field: StructField, p: Comparison | In | IsNull) -> pa.Array:
        values = self._partition_values(field)
        if isinstance(p, IsNull):
            return pc.is_valid(values) if p.negated else pc.is_null(values)
        scalars = self._scalars(field, p)
        if scalars is None:
            return self._all
        floating = pa.types.is_floating(values.type)
        values = values.cast(comparison_type(values.type))
        if isinstance(p, In):
            present = [s for s in scalars if s is not None]
            if p.negated and len(present) < len(scalars):
                return self._none  # x NOT IN (..., NULL) is never true
            if floating or any(isinstance(s, Range) for s in present):
                # Equality, not hashing: -0.0 = 0.0 in Spark, and hash sets tell them apart.
                if p.negated:
                    mask = pc.is_valid(values)
                    for s in present:
                        differs = pc.invert(_compare(values, "=", s))
                        mask = pc.and_(mask, pc.fill_null(differs, True))
                    return mask
                mask = self._none
                for s in present:
                    mask = pc.or_(mask, pc.fill_null(_compare(values, "=", s), False))
            else:
                hit = pc.is_in(values, value_set=pa.array(present, values.type))
                hit = pc.invert(hit) if p.negated else hit
                mask = pc.and_(hit, pc.is_valid(values))
        elif scalars[0] is None:
            return self._none  # a comparison with NULL is never true
        else:
            mask = pc.fill_null(_compare(values, p.op, scalars[0]), False)
        if floating:
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
        if isinstance(p, In) and p.negated:
            return self._all
        scalars = self._scalars(field, p)
        if scalars is None:
            return self._all
        if not [s for s in scalars if s is not None]:
            return self._none
        op = p.op if isinstance(p, Comparison) else "="
        if _type_name(field) in _FLOATING and op in (">", ">=", "!="):
            return self._all  # NaN sorts above every number and is not in the statistics
        lo, hi = stats["min"], stats["max"]
        if _type_name(field) == "string":
            hi = _string_upper_bound(hi, scalars, self.exact_string_max_below)
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


COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _is_nan(s: Any) -> bool:
    if not isinstance(s, pa.Scalar) or not pa.types.is_floating(s.type) or not s.is_valid:
        return False
    return math.isnan(s.as_py())


def _compare(values: pa.Array, op: str, v: pa.Scalar | Range) -> pa.Array:
    """``values op v`` exactly, or, for a :class:`Range`, whether it may hold."""
    if not isinstance(v, Range):
        return COMPARE[op](values, v)
    if op == "=":
        return pc.and_kleene(pc.greater_equal(values, v.lo), pc.less_equal(values, v.hi))
    if op == "!=":
        return pc.is_valid(values)
    return COMPARE[op](values, v.hi if op in ("<", "<=") else v.lo)


def _may_hold(op: str, lo: pa.Array, hi: pa.Array, v: pa.Scalar | Range) -> pa.Array:
    """Whether some value in [lo, hi] may satisfy ``value op v`` (null where unknown)."""
    if isinstance(v, Range):
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


# delta-spark's default string prefix in statistics, and the prefix delta-rs always cuts at.
_COMMON_PREFIX_LENGTH = 32


def exact_string_max_below(prefix_length: int | None) -> int:
    """String maxima shorter than this many characters were not cut by their writer: the
    smaller of the table's ``delta.dataSkippingStringPrefixLength`` (delta-spark's cut) and
    32 (the default, and delta-rs's fixed cut); 0 when the table's setting is unknown."""
    if not prefix_length:
        return 0
    return min(prefix_length, _COMMON_PREFIX_LENGTH)


def _string_upper_bound(
    hi: pa.ChunkedArray, scalars: list[Any], exact_below: int = 0
) -> pa.ChunkedArray:
    """An upper bound of a file's strings from its ``maxValues`` entry, whatever the writer.

    Writers truncate a long maximum: delta-spark to a prefix plus a tie-breaker character
    (``U+10FFFF``, or ``U+007F``; older versions ``U+FFFF``, which a supplementary character
    exceeds), others to a bare prefix, which is below the real maximum. In every case the real
    maximum starts with the entry less its last character, ``p``. ``p`` followed by more
    ``U+10FFFF`` than any literal has characters is above every string starting with ``p``
    that can equal or fall below a literal, so comparisons with the literals stay safe."""
    longest = max(len(s.as_py()) for s in scalars if s is not None)
    prefix = pc.utf8_slice_codeunits(hi, 0, -1)
    suffix = pa.scalar("\U0010ffff" * (longest + 1), hi.type)
    widened = pc.binary_join_element_wise(prefix, suffix, pa.scalar("", hi.type))
    if not exact_below:
        return widened
    # A maximum shorter than every writer's cut is the file's real maximum.
    return pc.if_else(pc.less(pc.utf8_length(hi), exact_below), hi, widened)


def _type_name(field: StructField) -> str:
    return field.type.name if isinstance(field.type, PrimitiveType) else ""


def _parse_stats(stats: pa.ChunkedArray, field: StructField, column_mapping: bool) -> pa.Table:
    """``min``, ``max``, ``nullCount`` and ``numRecords`` of one column, one row per file.

    Bounds are in the column's comparison type (float64 for floating columns, a float32
    bound widened exactly); a NaN bound is dropped (missing: the file is kept), timestamp
    maxima are raised by the millisecond their text may have lost."""
    name = field.physical_name if column_mapping else field.name
    value_type = to_arrow(field.type)
    floating = _type_name(field) in _FLOATING
    text_type = pa.string() if _type_name(field) in _TIMESTAMPS | {"date"} else value_type
    lines = [line or "{}" for line in pc.fill_null(stats, "{}").to_pylist()]
    try:
        table = _read_stats_json(lines, name, text_type)
    except pa.ArrowInvalid:
        if not floating:
            raise
        # delta-spark writes NaN and ±Infinity bounds as the strings "NaN", "Infinity".
        table = _read_float_stats(lines, name)
    lo = pc.struct_field(table["minValues"], name)
    hi = pc.struct_field(table["maxValues"], name)
    if floating:
        lo, hi = (_without_nan(b.cast(value_type).cast(pa.float64())) for b in (lo, hi))
    elif text_type != value_type:
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


def _stats_schema(name: str, value_type: pa.DataType) -> pa.Schema:
    json_type = pa.struct([pa.field(name, value_type)])
    return pa.schema(
        [
            ("numRecords", pa.int64()),
            ("minValues", json_type),
            ("maxValues", json_type),
            ("nullCount", pa.struct([pa.field(name, pa.int64())])),
        ]
    )


def _read_stats_json(lines: list[str], name: str, value_type: pa.DataType) -> pa.Table:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    table = pa_json.read_json(
        io.BytesIO(data),
        read_options=pa_json.ReadOptions(block_size=max(len(data) + 1, 1 << 20)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=_stats_schema(name, value_type), unexpected_field_behavior="ignore"
        ),
    )
    if table.num_rows != len(lines):
        raise pa.ArrowInvalid("statistics rows do not line up with files")
    return table


def _read_float_stats(lines: list[str], name: str) -> pa.Table:
    """Floating statistics that hold strings ("NaN", "Infinity", "-Infinity"), read in Python
    (only when Arrow's reader refused them); a bound that is not a number is missing."""
    rows = []
    for line in lines:
        stats = json.loads(line) if line else {}
        stats = stats if isinstance(stats, dict) else {}
        row: dict[str, Any] = {"numRecords": _number(stats.get("numRecords"), int)}
        for key in ("minValues", "maxValues", "nullCount"):
            part = stats.get(key)
            value = part.get(name) if isinstance(part, dict) else None
            row[key] = {name: _number(value, int if key == "nullCount" else float)}
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=_stats_schema(name, pa.float64()))


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool) or value is None:
        return None
    if kind is int:
        return value if isinstance(value, int) else None
    if isinstance(value, str):
        try:
            return float(value)  # "NaN", "Infinity", "-Infinity"
        except ValueError:
            return None
    return float(value) if isinstance(value, int | float) else None


def _without_nan(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """NaN bounds as missing: Spark's NaN is above every number, so a NaN maximum hides the
    finite one and a NaN minimum says only that the file holds NaN."""
    return pc.if_else(pc.fill_null(pc.is_nan(values), False), pa.scalar(None, values.type), values)


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
    string_prefix_length: int = 0,
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
        string_prefix_length=string_prefix_length,
    )
