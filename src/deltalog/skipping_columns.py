"""The columns data skipping indexes, as the reference's ``StatisticsCollection`` and
``ClusteredTableUtils`` decide them.

* Which types get ``minValues``/``maxValues`` (delta-spark's ``SkippingEligibleDataType``):
  numbers, dates, timestamps and strings; every other leaf gets a ``nullCount`` only.
* ``delta.dataSkippingStatsColumns``: a comma-separated list of multi-part column names
  (:func:`parse_column_list`). A new metadata's list is checked (:func:`validate_stats_columns`,
  the reference's ``validateDeltaStatsColumns``, run on every metadata update) and follows
  ``DROP COLUMN`` and ``RENAME COLUMN`` (:func:`drop_stats_columns`, :func:`rename_stats_column`).
* A clustering column must have min/max statistics (:func:`check_clustering_columns`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence

from deltalog.errors import alter as alter_errors
from deltalog.schema import (
    DataType,
    DecimalType,
    PrimitiveType,
    StructType,
    field_at_parts,
    simple_string,
)

STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
_ELIGIBLE_PRIMITIVES = frozenset(
    {"byte", "short", "integer", "long", "float", "double", "date", "timestamp", "timestamp_ntz"}
    | {"string"}
)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")

ColumnPath = tuple[str, ...]


def is_skipping_eligible(t: DataType) -> bool:
    """Whether a leaf of type ``t`` gets min/max statistics (``SkippingEligibleDataType``;
    variants get none, as with the reference's default settings)."""
    return isinstance(t, DecimalType) or (
        isinstance(t, PrimitiveType) and t.name in _ELIGIBLE_PRIMITIVES
    )


def listed_stats_columns(configuration: Mapping[str, str]) -> str | None:
    """The raw ``delta.dataSkippingStatsColumns`` value (the key matched ignoring case)."""
    key = _stats_key(configuration)
    return None if key is None else configuration[key]


def _stats_key(configuration: Mapping[str, str]) -> str | None:
    lowered = STATS_COLUMNS_KEY.lower()
    return next((k for k in configuration if k.lower() == lowered), None)


def parse_column_list(text: str) -> list[ColumnPath]:
    """Comma-separated multi-part column names (``a, b.c, `x.y`.z``; backticks quote, doubled
    backticks escape one), as ``delta.dataSkippingStatsColumns`` holds them.

    Raises:
        ValueError: an unclosed backtick.
    """
    columns: list[ColumnPath] = []
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "`":
            end = i + 1
            while True:
                end = text.find("`", end)
                if end < 0:
                    raise ValueError(f"unclosed backtick in column list {text!r}")
                if text[end + 1 : end + 2] != "`":
                    break
                end += 2
            current.append(text[i + 1 : end].replace("``", "`"))
            i = end + 1
            continue
        if c in ".,":
            parts.append("".join(current).strip())
            current = []
            if c == ",":
                columns.append(tuple(parts))
                parts = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current).strip())
    columns.append(tuple(parts))
    return [c for c in columns if any(c)]


def format_column_list(columns: Sequence[ColumnPath]) -> str:
    """``columns`` as a list :func:`parse_column_list` reads back (Spark's ``quoteIfNeeded``
    per name part)."""
    return ",".join(".".join(_quoted(part) for part in path) for path in columns)


def _quoted(part: str) -> str:
    if _PLAIN_NAME.fullmatch(part) and not part.isdigit():
        return part
    return "`" + part.replace("`", "``") + "`"


def validate_stats_columns(
    schema: StructType,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    table: str,
) -> None:
    """Check ``delta.dataSkippingStatsColumns`` against the metadata it is part of: no
    partition column, every column in the schema (names matched ignoring case), a top-level
    column of a type that gets min/max (a struct brings its leaves, and a nested leaf named
    directly only loses its min/max, as in the reference), no column twice.

    Raises:
        InvalidArgumentError: ``DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_PARTITIONED_COLUMN``,
            ``DELTA_COLUMN_NOT_FOUND_IN_SCHEMA``, ``DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE``,
            ``DELTA_DUPLICATE_DATA_SKIPPING_COLUMNS``.
    """
    listed = listed_stats_columns(configuration)
    if listed is None:
        return
    try:
        paths = parse_column_list(listed)
    except ValueError:
        return  # the property's own check refuses it (table_properties)
    partitions = {c.lower() for c in partition_columns}
    visited: list[str] = []
    for path in paths:
        name = ".".join(path)
        if name.lower() in partitions:
            raise alter_errors.data_skipping_on_partition_column(table, name)
        field = field_at_parts(schema, path)
        if field is None:
            raise alter_errors.column_not_found(table, name, simple_string(schema))
        _visit(name, field.type, visited, inside_struct=len(path) > 1, table=table)
    duplicated = sorted({n for n in visited if visited.count(n) > 1})
    if duplicated:
        raise alter_errors.duplicate_data_skipping_columns(table, duplicated)


def _visit(name: str, t: DataType, visited: list[str], *, inside_struct: bool, table: str) -> None:
    if isinstance(t, StructType):
        for f in t.fields:
            _visit(f"{name}.{_quoted(f.name)}", f.type, visited, inside_struct=True, table=table)
    elif is_skipping_eligible(t) or inside_struct:
        visited.append(name)
    else:
        raise alter_errors.data_skipping_not_supported_type(table, name, simple_string(t))


def drop_stats_columns(
    configuration: Mapping[str, str], dropped: Sequence[ColumnPath]
) -> dict[str, str]:
    """``configuration`` with every listed stats column inside a dropped column left out of
    ``delta.dataSkippingStatsColumns`` (names compared exactly, as the reference does)."""
    return _rewrite(
        configuration,
        lambda paths: [p for p in paths if not any(p[: len(d)] == tuple(d) for d in dropped)],
    )


def rename_stats_column(
    configuration: Mapping[str, str], old: ColumnPath, new: ColumnPath
) -> dict[str, str]:
    """``configuration`` with listed stats columns at or under ``old`` moved to ``new``."""
    n = len(old)
    return _rewrite(
        configuration,
        lambda paths: [(*new, *p[n:]) if p[:n] == tuple(old) else p for p in paths],
    )


def _rewrite(
    configuration: Mapping[str, str], change: Callable[[list[ColumnPath]], list[ColumnPath]]
) -> dict[str, str]:
    out = dict(configuration)
    key = _stats_key(out)
    if key is None:
        return out
    try:
        paths = parse_column_list(out[key])
    except ValueError:
        return out
    changed = change(paths)
    if changed != paths:
        out[key] = format_column_list(changed)
    return out


def check_clustering_columns(
    columns: Sequence[tuple[ColumnPath, DataType]],
    indexed: Collection[ColumnPath],
    stats_schema: str,
    table: str,
) -> None:
    """Refuse clustering columns without min/max statistics (the reference's
    ``validateClusteringColumnsInStatsSchema``). ``columns``: each clustering column's path of
    logical names and type; ``indexed``: the lower-cased paths of the leaves that get min/max
    under the table's settings; ``stats_schema``: those leaves, for the message.

    Raises:
        InvalidArgumentError: ``DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED`` for a column
            whose type gets no min/max (a struct, a boolean, binary, an array, a map, a
            geospatial type...), else ``DELTA_CLUSTERING_COLUMN_MISSING_STATS`` for one left
            out of the statistics (past ``delta.dataSkippingNumIndexedCols``, or not listed).
    """
    lowered = {tuple(p.lower() for p in path) for path in indexed}
    missing = [(p, t) for p, t in columns if tuple(x.lower() for x in p) not in lowered]
    if not missing:
        return
    ineligible = [(p, t) for p, t in missing if not is_skipping_eligible(t)]
    if ineligible:
        described = ", ".join(f"{'.'.join(p)} : {simple_string(t).upper()}" for p, t in ineligible)
        raise alter_errors.clustering_columns_datatype_not_supported(table, described)
    names = ", ".join(".".join(p) for p, _ in missing)
    raise alter_errors.clustering_column_missing_stats(table, names, stats_schema)
