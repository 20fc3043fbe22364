"""Which parquet leaf columns of a data file get dictionaries and footer statistics.

Floating leaves get neither: parquet-mr (Spark's reader) trusts both to skip row groups, and
pyarrow's ignore NaN (Spark's greatest value) and keep -0.0 apart from 0.0, so a JVM reader of
our files would drop rows Spark's filter selects. Delta's own JSON statistics come from the rows
(:mod:`deltalog.write.stats`), not from the footer.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def leaf_paths(schema: pa.Schema) -> list[tuple[str, bool]]:
    """Each parquet leaf column's dotted path (as pyarrow names it: ``list.element``,
    ``key_value.key``) and whether it is floating."""
    out: list[tuple[str, bool]] = []

    def walk(prefix: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(f"{prefix}.{t.field(i).name}", t.field(i).type)
        elif pa.types.is_map(t):
            walk(f"{prefix}.key_value.key", t.key_type)
            walk(f"{prefix}.key_value.value", t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(f"{prefix}.list.element", t.value_type)
        else:
            out.append((prefix, pa.types.is_floating(t)))

    for f in schema:
        walk(f.name, f.type)
    return out


def non_floating_leaves(schema: pa.Schema) -> bool | list[str]:
    """pyarrow's ``use_dictionary`` / ``write_statistics`` value: every leaf but the floating
    ones (``True`` when there is none)."""
    leaves = leaf_paths(schema)
    return True if not any(f for _, f in leaves) else [p for p, f in leaves if not f]


def dictionary_leaves(
    schema: pa.Schema, delta_encoded: tuple[str, ...], plain: frozenset[str] = frozenset()
) -> bool | list[str]:
    """pyarrow's ``use_dictionary``: :func:`non_floating_leaves` less the top-level columns
    written with delta encoding instead (row tracking's materialized columns) and those
    written ``plain`` (:func:`distinct_columns`)."""
    leaves = non_floating_leaves(schema)
    if not delta_encoded and not plain:
        return leaves
    paths = [p for p, _ in leaf_paths(schema)] if leaves is True else leaves
    assert isinstance(paths, list)
    return [p for p in paths if p not in delta_encoded and p not in plain]


# Rows of a file's first batch sampled by distinct_columns, and the fewest worth sampling.
_SAMPLE_ROWS = 4096
_MIN_SAMPLE = 1024


def distinct_columns(rows: pa.Table) -> frozenset[str]:
    """The top-level primitive columns of ``rows`` (a file's first rows) whose values are
    more than half distinct among the first few thousand: a dictionary of such a column
    outgrows its page and pyarrow falls back to plain pages after hashing a megabyte of
    values (writing 500k unique longs and 100k distinct strings took twice the time with
    dictionaries tried), so they are written plain at once. Only the encoding changes."""
    if rows.num_rows < _MIN_SAMPLE:
        return frozenset()
    head = rows.slice(0, _SAMPLE_ROWS)
    out = set()
    for name, column in zip(head.column_names, head.columns, strict=True):
        t = column.type
        if pa.types.is_nested(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            continue
        if pc.count_distinct(column).as_py() * 2 > head.num_rows:
            out.add(name)
    return frozenset(out)
