"""Per-file statistics, the ``add.stats`` JSON (PROTOCOL.md "Per-file Statistics"; writes.md §2.9),
following delta-spark's ``StatisticsCollection``:

- columns: ``delta.dataSkippingStatsColumns`` when set, else the first
  ``delta.dataSkippingNumIndexedCols`` (32; negative = all) leaves of the schema minus the
  partition columns, depth first; an array, map or binary column counts as one leaf;
- ``numRecords``; ``nullCount`` of every indexed leaf (a leaf under a null struct is null);
  ``minValues``/``maxValues`` only for numbers, decimals, dates, timestamps and strings;
- strings: the min is cut to the first ``delta.dataSkippingStringPrefixLength`` (32) code points;
  a longer max is cut and given a tie-breaker (``truncateMaxStringAgg``), or dropped;
- timestamps: milliseconds, truncated down, ISO-8601 in UTC (``...T18:00:00.123Z``), and
  ``timestamp_ntz`` without the zone;
- keys are physical names under column mapping; ``tightBounds`` only when asked.

Statistics are computed with ``pyarrow.compute`` per column and batch, never per row, and merge
across batches (:class:`StatsCollector`), so a file written in pieces gets one exact summary.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.schema import DataType, DecimalType, PrimitiveType, StructField, StructType
from deltalog.skipping_columns import is_skipping_eligible, parse_column_list
from deltalog.table_properties import TableProperties

DEFAULT_STRING_PREFIX_LENGTH = 32
_ASCII_MAX = "\x7f"
_UTF8_MAX = "\U0010ffff"
_EPOCH = dt.datetime(1970, 1, 1)
# The longest string parquet-cpp keeps as a footer min or max (``max_statistics_size``).
_FOOTER_STRING_BYTES = 4096
# Arrow timestamp unit -> (multiply, floor-divide) to microseconds.
_TO_MICROS = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}


@dataclass(frozen=True, slots=True)
class StatsColumn:
    """One indexed leaf: its path of logical names (to find it in the data), its path of stats
    keys (physical names under column mapping), its type and whether it gets min/max."""

    path: tuple[str, ...]
    key: tuple[str, ...]
    data_type: DataType

    @property
    def has_min_max(self) -> bool:
        return is_skipping_eligible(self.data_type)


def stats_columns(
    schema: StructType,
    partition_columns: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    column_mapping_mode: str = "none",
) -> tuple[StatsColumn, ...]:
    """The leaves that get statistics, depth first in schema order."""
    props = TableProperties(configuration or {})
    mapped = column_mapping_mode != "none"
    # Read raw: the list may quote names with backticks (which may hold commas and dots).
    listed = props.get("delta.dataSkippingStatsColumns")
    if listed is not None:
        wanted = [tuple(p.lower() for p in path) for path in parse_column_list(listed)]
        return tuple(_selected_leaves(schema.fields, wanted, (), (), mapped))
    lowered = {c.lower() for c in partition_columns}
    fields = [f for f in schema.fields if f.name.lower() not in lowered]
    leaves = list(_leaves(fields, (), (), mapped))
    limit = props.data_skipping_num_indexed_cols
    return tuple(leaves if limit < 0 else leaves[:limit])


def _leaves(
    fields: Sequence[StructField], path: tuple[str, ...], key: tuple[str, ...], mapped: bool
) -> list[StatsColumn]:
    out: list[StatsColumn] = []
    for f in fields:
        name = f.physical_name if mapped else f.name
        if isinstance(f.type, StructType):
            out.extend(_leaves(f.type.fields, (*path, f.name), (*key, name), mapped))
        else:
            out.append(StatsColumn((*path, f.name), (*key, name), f.type))
    return out


def _selected_leaves(
    fields: Sequence[StructField],
    wanted: list[tuple[str, ...]],
    path: tuple[str, ...],
    key: tuple[str, ...],
    mapped: bool,
) -> list[StatsColumn]:
    # As the reference's filterSchema: schema order, names matched ignoring case, a struct named
    # in full brings all its leaves, a path into a non-struct matches nothing.
    out: list[StatsColumn] = []
    for f in fields:
        rests = [w[1:] for w in wanted if w and w[0] == f.name.lower()]
        if not rests:
            continue
        name = f.physical_name if mapped else f.name
        if any(not r for r in rests):
            out.extend(_leaves([f], path, key, mapped))
        elif isinstance(f.type, StructType):
            nested = _selected_leaves(f.type.fields, rests, (*path, f.name), (*key, name), mapped)
            out.extend(nested)
    return out


class _Leaf:
    """Running statistics of one column: null count, min and max of non-null, non-NaN values,
    and NaN count (floats)."""

    __slots__ = (
        "column",
        "from_footer",
        "max",
        "min",
        "min_max_unknown",
        "nan_count",
        "null_count",
        "read_long",
    )

    def __init__(self, column: StatsColumn, *, from_footer: bool = False) -> None:
        self.column = column
        self.null_count: int | None = 0
        self.min_max_unknown = False
        self.nan_count = 0
        self.min: Any = None
        self.max: Any = None
        # Null count, min and max from the file's footer (:meth:`StatsCollector.add_footer`),
        # but for pieces holding a value too long for it, whose min and max are read here.
        self.from_footer = from_footer
        self.read_long = False

    def update_from_chunks(self, chunks: Sequence[Any]) -> None:
        """Merge parquet column-chunk statistics (``ColumnChunkMetaData``) of one column."""
        for chunk in chunks:
            stats = chunk.statistics
            if stats is None or self.null_count is None:
                self.null_count = None
                self.min_max_unknown = True
                return
            self.null_count += stats.null_count
            if not self.column.has_min_max or stats.num_values == 0:
                continue
            if not stats.has_min_max:
                # A footer leaf's chunk without min/max held a value too long for the
                # footer: its piece's min and max were read from the rows.
                self.min_max_unknown |= not self.read_long
                continue
            t = self.column.data_type
            low = _footer_value(stats.min, t)
            high = _footer_value(stats.max, t)
            if isinstance(high, float) and math.isnan(high):
                # parquet-mr orders NaN last, as Spark does: a NaN max means the chunk holds a
                # NaN (the finite max is unknown; ``_bounds`` drops the max), a NaN min means
                # it holds nothing else.
                self.nan_count += 1
                if math.isnan(low):
                    continue
                high = low
            if low is None or high is None:
                self.min_max_unknown = True
                continue
            self.min = low if self.min is None else min(self.min, low)
            self.max = high if self.max is None else max(self.max, high)

    def update(self, values: pa.ChunkedArray | None, num_rows: int) -> None:
        assert self.null_count is not None
        if self.from_footer:
            if values is not None and _holds_long_string(values):
                self.read_long = True
                self._update_min_max(values)
            return
        if values is None:  # absent from the data: all null, as the reference counts it
            self.null_count += num_rows
            return
        self.null_count += values.null_count
        self._update_min_max(values)

    def _update_min_max(self, values: pa.ChunkedArray) -> None:
        if not self.column.has_min_max or values.null_count == len(values):
            return
        t = self.column.data_type
        if isinstance(t, PrimitiveType) and t.name in ("float", "double"):
            self.nan_count += pc.sum(pc.is_nan(values)).as_py() or 0
        scale = None
        if pa.types.is_timestamp(values.type):
            # Integers (micros) merge exactly and avoid datetime's range limits.
            scale = _TO_MICROS[values.type.unit]
            values = values.cast(pa.int64())
        elif pa.types.is_date32(values.type):
            values = values.cast(pa.int32())  # days
        low, high = (v.as_py() for v in pc.min_max(values).values())
        if low is None:
            return
        if scale is not None:
            low, high = _to_micros(low, scale), _to_micros(high, scale)
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)


def _footer_value(value: Any, data_type: DataType) -> Any:
    """A footer min/max (pyarrow's logical value) in the units ``_Leaf`` keeps."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - _EPOCH.date()).days
    if isinstance(value, bytes) and isinstance(data_type, PrimitiveType):
        return value.decode("utf-8", errors="replace") if data_type.name == "string" else None
    return value


class StatsCollector:
    """The statistics of one data file, fed the file's rows in any number of pieces.

    Pieces are Arrow tables with the table schema's LOGICAL column names (nested too), the
    partition columns optional (they get no statistics); an indexed column missing from a piece
    counts as all null there.
    """

    def __init__(
        self,
        columns: Sequence[StatsColumn],
        *,
        string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
        tight_bounds: bool = False,
        footer_strings: bool = False,
    ) -> None:
        footer = footer_strings and footer_strings_exact()
        self._leaves = [_Leaf(c, from_footer=footer and _is_top_string(c)) for c in columns]
        self._prefix = string_prefix_length
        self._tight_bounds = tight_bounds
        self.num_records = 0

    @classmethod
    def for_table(
        cls,
        schema: StructType,
        partition_columns: Sequence[str] = (),
        configuration: Mapping[str, str] | None = None,
        column_mapping_mode: str = "none",
        *,
        tight_bounds: bool = False,
        footer_strings: bool = False,
    ) -> StatsCollector:
        """A collector with the table's indexed columns and string prefix length.

        ``footer_strings``: the caller writes the rows into one parquet file (under the
        physical names) and passes its footer to :meth:`add_footer`, from which top-level
        string columns take their statistics: parquet computed them already, while Arrow's
        ``min_max`` of strings was a tenth of a write's CPU."""
        conf = configuration or {}
        columns = stats_columns(schema, partition_columns, conf, column_mapping_mode)
        prefix = string_prefix_length(conf)
        return cls(
            columns,
            string_prefix_length=prefix,
            tight_bounds=tight_bounds,
            footer_strings=footer_strings,
        )

    def update(self, data: pa.Table | pa.RecordBatch) -> None:
        """Add the rows of ``data``."""
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        self.num_records += table.num_rows
        for leaf in self._leaves:
            leaf.update(_column(table, leaf.column.path), table.num_rows)

    def to_json(self) -> str:
        """The ``add.stats`` text of everything added so far."""
        mins: dict[str, Any] = {}
        maxes: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for leaf in self._leaves:
            key = leaf.column.key
            if leaf.null_count is not None:
                _put(nulls, key, leaf.null_count)
            if leaf.column.has_min_max and not leaf.min_max_unknown:
                low, high = self._bounds(leaf)
                _put(mins, key, low)
                _put(maxes, key, high)
        stats: dict[str, Any] = {"numRecords": self.num_records}
        # The reference writes a minValues/maxValues struct whenever some indexed leaf is
        # eligible (values that are null, e.g. an all-null column, are left out of it).
        if any(leaf.column.has_min_max for leaf in self._leaves):
            stats["minValues"] = mins
            stats["maxValues"] = maxes
        if self._leaves:
            stats["nullCount"] = nulls
        if self._tight_bounds:
            stats["tightBounds"] = True
        return _dumps(stats)

    def update_from_footer(self, metadata: pq.FileMetaData) -> None:
        """Add a whole file from its parquet footer (a file Spark's own writer wrote, columns by
        logical name): row count, and per leaf the null count and min/max merged over row
        groups. A leaf the footer cannot describe exactly (inside an array or map, or a row
        group without statistics) loses that statistic: a missing one never skips a file."""
        self.num_records += metadata.num_rows
        paths = {
            tuple(metadata.schema.column(i).path.split(".")): i for i in range(metadata.num_columns)
        }
        for leaf in self._leaves:
            index = paths.get(leaf.column.path)
            if index is None:
                if not any(p[: len(leaf.column.path)] == leaf.column.path for p in paths):
                    leaf.null_count += metadata.num_rows  # absent from the file: all null
                else:
                    leaf.null_count = None  # nested in a list or map: not one parquet column
                continue
            leaf.update_from_chunks(
                [metadata.row_group(g).column(index) for g in range(metadata.num_row_groups)]
            )

    def add_footer(self, metadata: pq.FileMetaData) -> None:
        """Add the statistics of the leaves taken from the footer (``footer_strings``) from
        the footer of the file the rows went into: null counts, min and max merged over its
        row groups."""
        paths = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        for leaf in self._leaves:
            if not leaf.from_footer:
                continue
            index = paths.get(leaf.column.key[0])
            if index is None:  # not in the file: all null
                assert leaf.null_count is not None
                leaf.null_count += metadata.num_rows
                continue
            leaf.update_from_chunks([group.column(index) for group in groups])

    def _bounds(self, leaf: _Leaf) -> tuple[Any, Any]:
        t = leaf.column.data_type
        low, high = leaf.min, leaf.max
        if isinstance(t, DecimalType):
            return low, high
        assert isinstance(t, PrimitiveType)
        if t.name in ("float", "double"):
            # delta-spark takes Spark's min/max, where NaN sorts above every number (so any NaN
            # makes the max NaN, and only an all-NaN column has a NaN min), and Jackson writes
            # NaN/±Infinity as the strings "NaN"/"Infinity", which other readers do not parse as
            # numbers. We leave such bounds out instead: a missing bound keeps the file, so
            # skipping stays correct everywhere. Values are written exactly (a float32 0.1f as
            # 0.10000000149011612), so a reader comparing in double never sees a max too low.
            if leaf.nan_count:
                high = None
            return _finite(low), _finite(high)
        if t.name == "string":
            return _truncate_min(low, self._prefix), _truncate_max(high, self._prefix)
        if t.name == "date":
            return _date(low), _date(high)
        if t.name in ("timestamp", "timestamp_ntz"):
            zone = "Z" if t.name == "timestamp" else ""
            return _timestamp(low, zone), _timestamp(high, zone)
        return low, high


def file_stats(
    data: pa.Table,
    schema: StructType,
    *,
    partition_columns: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    column_mapping_mode: str = "none",
    tight_bounds: bool = False,
) -> str:
    """The ``add.stats`` JSON of one file holding the rows of ``data`` (logical column names;
    see :class:`StatsCollector`). ``tight_bounds`` adds ``"tightBounds":true``: pass it when the
    table's protocol supports deletion vectors, as the reference does."""
    collector = StatsCollector.for_table(
        schema, partition_columns, configuration, column_mapping_mode, tight_bounds=tight_bounds
    )
    collector.update(data)
    return collector.to_json()


def string_prefix_length(configuration: Mapping[str, str]) -> int:
    """``delta.dataSkippingStringPrefixLength``, else the session default (32).

    Raises:
        InvalidTableError: the property is not an integer.
    """
    raw = configuration.get("delta.dataSkippingStringPrefixLength")
    if raw is None:
        return DEFAULT_STRING_PREFIX_LENGTH
    try:
        return int(raw.strip())
    except ValueError:
        raise errors.InvalidTableError(
            "DELTA_INVALID_TABLE_PROPERTY",
            f"Table property delta.dataSkippingStringPrefixLength has an invalid value {raw!r}.",
            help="set it to a whole number of characters.",
        ) from None


def _is_top_string(column: StatsColumn) -> bool:
    t = column.data_type
    return len(column.path) == 1 and isinstance(t, PrimitiveType) and t.name == "string"


def _holds_long_string(values: pa.ChunkedArray) -> bool:
    """Whether a value of ``values`` is longer than a parquet footer keeps."""
    longest = pc.max(pc.binary_length(values)).as_py()
    return longest is not None and longest > _FOOTER_STRING_BYTES


@functools.cache
def footer_strings_exact() -> bool:
    """Whether this pyarrow's parquet footers hold string min/max exactly, and none for a
    column chunk with a min or max over ``_FOOTER_STRING_BYTES`` (parquet-cpp's default
    ``max_statistics_size``: dropped, not truncated), in byte order as Arrow's ``min_max``.
    Checked once by writing a small file; a pyarrow that truncates keeps every string's
    statistics computed from the rows."""
    # The max is the longest value kept (U+00FF: 2 bytes), above "z" only in unsigned order.
    edge = "\u00ff" * (_FOOTER_STRING_BYTES // 2)
    data = pa.table(
        {
            "kept": pa.array(["\u00e9b", edge, None, "a\u00ff", "z"]),
            "dropped": pa.array(["q" * (_FOOTER_STRING_BYTES + 1), "a", "b", "c", "d"]),
        }
    )
    return all(_footer_exact(data, edge, dictionary) for dictionary in (True, False))


def _footer_exact(data: pa.Table, edge: str, dictionary: bool) -> bool:
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, use_dictionary=dictionary)
    footer = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata.row_group(0)
    kept, dropped = footer.column(0).statistics, footer.column(1).statistics
    return (
        kept is not None
        and kept.has_min_max
        and (kept.min, kept.max, kept.null_count) == ("a\u00ff", edge, 1)
        and dropped is not None
        and not dropped.has_min_max
    )


def _column(table: pa.Table, path: tuple[str, ...]) -> pa.ChunkedArray | None:
    """The leaf at ``path`` (exact name first, then ignoring case), null wherever a parent struct
    is null, or ``None`` when absent."""
    index = _index(table.schema.names, path[0])
    if index is None:
        return None
    values: pa.ChunkedArray = table.column(index)
    for name in path[1:]:
        if not pa.types.is_struct(values.type):
            return None
        child = _index([values.type.field(i).name for i in range(values.type.num_fields)], name)
        if child is None:
            return None
        # struct_field (unlike StructArray.field) folds the parent's validity into the child.
        values = pc.struct_field(values, [child])
    return values


def _index(names: Sequence[str], name: str) -> int | None:
    if name in names:
        return list(names).index(name)
    lowered = [n.lower() for n in names]
    return lowered.index(name.lower()) if name.lower() in lowered else None


def _put(target: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    for part in key[:-1]:
        target = target.setdefault(part, {})
    if value is not None:
        target[key[-1]] = value


def _to_micros(value: int, scale: tuple[int, int]) -> int:
    return value * scale[0] // scale[1]  # floor, as milliseconds are floored later


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _date(days: int | None) -> str | None:
    return None if days is None else (dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()


def _timestamp(micros: int | None, zone: str) -> str | None:
    if micros is None:
        return None
    millis = micros // 1000  # floor: both bounds truncated down, as the reference writes them
    value = _EPOCH + dt.timedelta(milliseconds=millis)
    return value.isoformat(timespec="milliseconds") + zone


def _truncate_min(value: str | None, prefix: int) -> str | None:
    """Spark's ``substring(min, 0, prefix)``: the first ``prefix`` code points."""
    if value is None:
        return None
    return value[:prefix] if prefix > 0 else ""


def _truncate_max(value: str | None, prefix: int) -> str | None:
    """delta-spark's ``truncateMaxStringAgg``: lengths count UTF-16 units, as Java strings do.

    Keep the first ``prefix`` units (plus a low surrogate so no pair is split); skip over
    ``U+10FFFF`` characters; then append ``U+007F`` if the next original character sorts below
    it, else ``U+10FFFF``, so the result is >= every string with the same prefix. If that cannot
    be done within ``2 * prefix`` units, there is no max (``None``)."""
    if value is None:
        return None
    units = _utf16(value)
    if len(units) <= prefix:
        return value
    if prefix <= 0:
        return None
    length = prefix + 1 if 0xDC00 <= units[prefix] <= 0xDFFF else prefix
    while length <= 2 * prefix:
        if length >= len(units):
            return value
        if units[length : length + 2] == [0xDBFF, 0xDFFF]:
            length += 2
        elif units[length] < 0x7F:
            return _from_utf16(units[:length]) + _ASCII_MAX
        else:
            return _from_utf16(units[:length]) + _UTF8_MAX
    return None


def _utf16(text: str) -> list[int]:
    raw = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def _from_utf16(units: list[int]) -> str:
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le")


def _dumps(value: Any) -> str:
    """Compact JSON; decimals as plain numbers at their scale (``json`` cannot write them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dumps(k)}:{_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
