"""Parameter markers in Delta's statements: ``spark.sql(text, args=...)`` as Spark binds them,
engine-free (a ``Column`` value is evaluated by the engine: :mod:`deltalog.spark.sql.params`).

Spark binds ``:name`` markers to a dict of ``args`` and ``?`` markers to a list, each value
becoming a literal (``lit(value)``). Queries that only read Delta tables go to Spark with their
markers and ``args`` unchanged; Delta's own statements (DML, DDL, maintenance), which deltalog
runs itself, are bound here first: each marker token is replaced by the SQL literal of its value
and the statement is parsed again. Markers are found among sqlglot's tokens of the text, so a
``:x`` or ``?`` inside a string, a quoted name or a comment is left alone, and ``v:path`` (a
variant path, no space before the colon) is not a marker.

Errors are Spark's: ``UNBOUND_SQL_PARAMETER`` for a marker without a value,
``INVALID_QUERY_MIXED_QUERY_PARAMETERS`` for ``:name`` and ``?`` in one statement, and
``INVALID_TYPE`` for ``args`` that are neither a dict nor a list.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot.tokens import TokenType

from deltalog import errors
from deltalog.sql.statements import DIALECT

_INT32 = range(-(2**31), 2**31)


ColumnSql = Callable[[Any], str]
"""The SQL literal of a literal ``Column`` (``lit(...)``): an engine evaluates it."""


def bind(
    text: str, args: Mapping[str, Any] | Sequence[Any], column_sql: ColumnSql | None = None
) -> str:
    """``text`` with each parameter marker replaced by the SQL literal of its value
    (``column_sql`` turns a ``Column`` value into one; without it a Column is refused).

    Raises:
        DeltaWriteError: ``UNBOUND_SQL_PARAMETER`` / ``INVALID_QUERY_MIXED_QUERY_PARAMETERS``.
        InvalidArgumentError: ``INVALID_TYPE``, ``args`` neither a dict nor a list.
    """
    if not isinstance(args, Mapping) and not isinstance(args, list):
        raise errors.InvalidArgumentError(
            "INVALID_TYPE",
            f"Argument `args` should not be a {type(args).__name__}.",
            help="pass a dict for :name markers or a list for ? markers.",
        )
    markers = _markers(text)
    named = [m for m in markers if m[2] is not None]
    if named and len(named) != len(markers):
        raise errors.DeltaWriteError(
            "INVALID_QUERY_MIXED_QUERY_PARAMETERS",
            "Parameterized query must either use positional, or named parameters, but not both.",
            help="use only :name markers with a dict, or only ? markers with a list.",
        )
    pieces: list[str] = []
    at = 0
    for position, (start, end, name) in enumerate(markers):
        pieces.append(text[at:start])
        pieces.append(literal_sql(_value(args, name, position), column_sql))
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _markers(text: str) -> list[tuple[int, int, str | None]]:
    """(start, end, name) of each marker (``name`` ``None`` for ``?``), in order."""
    tokens = sqlglot.tokenize(text, read=DIALECT)
    at = 0
    if tokens and tokens[0].token_type == TokenType.COMMAND:
        # sqlglot lexes a statement it does not know (VACUUM, OPTIMIZE, ...) as COMMAND + the
        # rest as one string: lex the rest again, as the statement's parser does.
        at = tokens[0].end + 1
        tokens = sqlglot.tokenize(text[at:], read=DIALECT)
    found: list[tuple[int, int, str | None]] = []
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.PLACEHOLDER and token.text == "?":
            found.append((at + token.start, at + token.end + 1, None))
        elif token.token_type == TokenType.COLON and i + 1 < len(tokens):
            name = tokens[i + 1]
            before = tokens[i - 1] if i > 0 else None
            after_word = (  # ``v:path``, a variant path
                before is not None
                and before.end + 1 == token.start
                and before.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            )
            if name.start == token.end + 1 and not after_word and name.text.isidentifier():
                found.append((at + token.start, at + name.end + 1, name.text))
    return found


def _value(args: Mapping[str, Any] | Sequence[Any], name: str | None, position: int) -> Any:
    if name is not None and isinstance(args, Mapping) and name in args:
        return args[name]
    if name is None and not isinstance(args, Mapping) and position < len(args):
        return args[position]
    shown = name if name is not None else f"_{position}"
    raise errors.DeltaWriteError(
        "UNBOUND_SQL_PARAMETER",
        f"Found the unbound parameter: {shown}.",
        help="pass a value for it in args (a dict for :name, a list for ?).",
    )


def literal_sql(value: Any, column_sql: ColumnSql | None = None) -> str:
    """Spark SQL for the literal ``lit(value)`` makes (a ``Column`` of a literal is evaluated).

    Raises:
        InvalidArgumentError: a value with no SQL literal.
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if value in _INT32 else f"{value}L"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"CAST('{value!r}' AS DOUBLE)".replace("inf", "Infinity").replace("nan", "NaN")
        return f"{value!r}D"
    if isinstance(value, decimal.Decimal):
        return f"{value}BD"
    if isinstance(value, str):
        return string_sql(value)
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex().upper()}'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, list | tuple):
        return f"ARRAY({', '.join(literal_sql(v, column_sql) for v in value)})"
    if column_sql is not None and (hasattr(value, "_jc") or hasattr(value, "_expr")):
        return column_sql(value)  # a Column, e.g. lit(...)
    raise errors.InvalidArgumentError(
        "INVALID_TYPE",
        f"A parameter of type {type(value).__name__} has no SQL literal.",
        help="pass a Python literal or a Column made with lit().",
    )


def string_sql(value: str) -> str:
    """A Spark string literal (backslash escapes, as Spark's parser reads them)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
