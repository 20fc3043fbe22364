"""Checks every written row must pass (reference ``DeltaInvariantChecker``), for the Python
writer: NOT NULL columns, CHECK constraints (``delta.constraints.<name>``) and the
``replaceWhere`` condition. A CHECK fails when its condition is false *or NULL*, stricter than
SQL, as in the reference. Spark writers check the same rules with Spark expressions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.scan.predicate import Opaque, Predicate, PredicateSyntaxError, parse_predicate
from deltalog.scan.row_filter import evaluate, is_true
from deltalog.schema import StructType

if TYPE_CHECKING:
    from deltalog.commands.write.write_into_delta import WritePlan
    from deltalog.write.file_writer import WriteLayout

GENERATION_KEY = "delta.generationExpression"


def check_batch(plan: WritePlan, batch: pa.RecordBatch) -> None:
    """Raise the reference's error for the first rule a row of ``batch`` breaks (see
    :func:`check_rows`)."""
    replace_where = plan.options.replace_where if plan.replace_predicate is not None else None
    check_rows(plan.layout, batch, replace_where)


def check_rows(layout: WriteLayout, batch: pa.RecordBatch, replace_where: str | None) -> None:
    """Raise the reference's error for the first rule a row of ``batch``, to be written with
    ``layout``, breaks; ``replace_where`` is the condition of an overwrite every row must meet.

    Raises:
        DeltaWriteError: DELTA_NOT_NULL_CONSTRAINT_VIOLATED, DELTA_VIOLATE_CONSTRAINT_WITH_VALUES
            or DELTA_REPLACE_WHERE_MISMATCH.
        UnsupportedFeatureError: the table has generated columns, or a constraint
            outside what the Python writer evaluates (write through Spark instead).
    """
    table = layout.table_root
    rows = pa.Table.from_batches([batch])
    schema = layout.schema
    _check_computed_columns(schema, table)
    _check_not_null(schema, rows, table)
    for name, expr in constraints(layout.configuration).items():
        mask = evaluate(_parse(expr), rows, table=table, schema=schema)
        _fail_on_false(
            mask,
            rows,
            table,
            "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
            f"CHECK constraint {name} {expr} violated by row with values:",
        )
    if replace_where is not None:
        mask = evaluate(_parse(replace_where), rows, table=table, schema=schema)
        _fail_on_false(
            mask,
            rows,
            table,
            "DELTA_REPLACE_WHERE_MISMATCH",
            "Written data does not conform to partial table overwrite condition or constraint "
            f"'{replace_where}'. Row:",
        )


def constraints(configuration: Mapping[str, str]) -> dict[str, str]:
    """The table's CHECK constraints: name -> SQL condition."""
    prefix = "delta.constraints."
    return {k[len(prefix) :]: v for k, v in configuration.items() if k.lower().startswith(prefix)}


def _parse(expr: str) -> Predicate:
    try:
        return parse_predicate(expr)
    except PredicateSyntaxError:
        return Opaque(expr)


def _check_computed_columns(schema: StructType, table: str) -> None:
    for f in schema.fields:
        if GENERATION_KEY in f.metadata:
            raise errors.UnsupportedFeatureError(
                "DELTA_UNSUPPORTED_WRITE_GENERATED_COLUMNS",
                f"column {f.name} is a generated column; the Python writer cannot evaluate its "
                "SQL expression.",
                table=table,
                help="write this table through Spark (df.write.format('delta')).",
            )


def _check_not_null(schema: StructType, rows: pa.Table, table: str) -> None:
    names = {n.lower(): n for n in rows.column_names}
    for f in schema.fields:
        if f.nullable:
            continue
        name = names.get(f.name.lower())
        if name is None or rows.column(name).null_count:
            raise errors.DeltaWriteError(
                "DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
                f"NOT NULL constraint violated for column: {f.name}.",
                table=table,
                help="write a value for every row of this column.",
            )


def _fail_on_false(mask: pa.Array, rows: pa.Table, table: str, error_class: str, text: str) -> None:
    bad = pc.invert(is_true(mask))
    if not pc.any(bad).as_py():
        return
    index = pc.index(bad, True).as_py()
    row = rows.slice(index, 1).to_pylist()[0]
    values = ", ".join(f"{k} = {v!r}" for k, v in row.items())
    raise errors.DeltaWriteError(error_class, f"{text} {values}.", table=table)
