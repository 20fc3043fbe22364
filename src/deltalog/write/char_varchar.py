"""Values written to ``CHAR(n)`` and ``VARCHAR(n)`` columns, as Spark writes them.

Spark keeps such a column as ``string`` with ``__CHAR_VARCHAR_TYPE_STRING`` field metadata, and
its write-side check (``CharVarcharCodegenUtils``) fits each value before it is stored: a value
longer than n characters loses trailing spaces down to n, and fails the write
(``EXCEED_LIMIT_LENGTH``) if it is still longer; a ``CHAR`` value is then padded with spaces to n.
Lengths are in characters (code points), as Spark's ``UTF8String.numChars``. The Python writers
(``write_table``, the local engine's UPDATE and MERGE) fit new values here; Spark's writes do the
same in Spark (``spark/write/batch.py``). Columns nested in structs, arrays or maps are not
fitted (their metadata is not kept either).
"""

from __future__ import annotations

from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.schema import StructField, StructType, char_varchar

_Rows = TypeVar("_Rows", pa.Table, pa.RecordBatch)


def fit_char_varchar(data: _Rows, schema: StructType, table: str) -> _Rows:
    """``data`` with each top-level ``CHAR``/``VARCHAR`` column of ``schema`` (matched by name,
    ignoring case) fitted by :func:`fit_values`; the same object when there is none.

    Raises:
        DeltaWriteError: ``EXCEED_LIMIT_LENGTH``.
    """
    positions = {name.lower(): i for i, name in enumerate(data.column_names)}
    for f in schema.fields:
        i = positions.get(f.name.lower())
        if i is None or char_varchar(f) is None:
            continue
        data = data.set_column(i, data.field(i), fit_values(data.column(i), f, table))
    return data


def fit_values(values: Any, field: StructField, table: str) -> Any:
    """``values`` for ``field`` as Spark stores them (unchanged when ``field`` is not declared
    ``CHAR(n)``/``VARCHAR(n)``); ``values`` is an array, a chunked array or a scalar.

    Raises:
        DeltaWriteError: ``EXCEED_LIMIT_LENGTH``: a value longer than n once its trailing
            spaces beyond n are dropped.
    """
    declared = char_varchar(field)
    if declared is None:
        return values
    if isinstance(values, pa.Scalar):
        return fit_values(pa.array([values.as_py()], values.type), field, table)[0]
    kind, limit = declared
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        return values
    over = pc.greater(pc.utf8_length(values), limit)
    if pc.any(over).as_py():
        if pc.any(pc.greater(pc.utf8_length(pc.utf8_rtrim(values, characters=" ")), limit)).as_py():
            raise errors.DeltaWriteError(
                "EXCEED_LIMIT_LENGTH",
                f"Exceeds char/varchar type length limitation: {limit}",
                table=table,
                help=f"write values of at most {limit} characters to column {field.name}.",
            )
        values = pc.if_else(over, pc.utf8_slice_codeunits(values, 0, limit), values)
    if kind == "char":
        values = pc.utf8_rpad(values, width=limit, padding=" ")
    return values
