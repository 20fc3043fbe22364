"""The ``DEFAULT`` keyword of Spark SQL's writes (PROTOCOL.md "Default Columns"): in an INSERT's
``VALUES`` rows or ``SELECT`` list, an UPDATE's or a MERGE's ``SET c = DEFAULT`` and a MERGE
``INSERT ... VALUES (..., DEFAULT)``, it stands for the column's default expression, or NULL
when the column has none (Spark's ``ResolveDefaultColumns``).

Only the unquoted word is the keyword (```default``` names a column). The substitution is
done on sqlglot's AST before the statement reaches Spark, which then evaluates the default's
SQL as any other expression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from deltalog.sql.tokens import DIALECT, SqlSyntaxError

KEYWORD = "DEFAULT"


def is_default(node: object) -> bool:
    """Whether ``node`` is the ``DEFAULT`` keyword (sqlglot reads it as a variable in ``VALUES``
    and as an unquoted column elsewhere)."""
    if isinstance(node, exp.Var):
        return node.name.upper() == KEYWORD
    if isinstance(node, exp.Column) and not node.table:
        ident = node.this
        return (
            isinstance(ident, exp.Identifier) and not ident.quoted and ident.name.upper() == KEYWORD
        )
    return False


def default_value(sql: str | None) -> exp.Expression:
    """The expression ``DEFAULT`` means for a column whose default is ``sql`` (NULL without
    one), parenthesized so it keeps its meaning wherever it is put.

    Raises:
        SqlSyntaxError: ``sql`` is not one expression.
    """
    if sql is None:
        return exp.Null()
    try:
        parsed = sqlglot.parse_one(sql, read=DIALECT)
    except sqlglot.errors.ParseError as e:
        raise SqlSyntaxError(f"the column default {sql!r} is not a SQL expression: {e}") from None
    return exp.Paren(this=parsed)


def replace_in_query(
    query: exp.Expression, columns: Sequence[str], defaults: Mapping[str, str | None]
) -> exp.Expression:
    """``query`` (an INSERT's ``VALUES`` or ``SELECT``, whose i-th value goes to
    ``columns[i]``) with each ``DEFAULT`` at the top of a row or of the select list replaced by
    that column's default (``defaults``: lower-cased name -> SQL, or None for NULL).

    Raises:
        SqlSyntaxError: a ``DEFAULT`` beyond the columns written.
    """
    query = query.copy()
    if isinstance(query, exp.Values):
        for row in query.expressions:
            items = row.expressions if isinstance(row, exp.Tuple) else [row]
            for i, item in enumerate(items):
                if is_default(item):
                    item.replace(_value(columns, i, defaults))
        return query
    if isinstance(query, exp.Select):
        for i, item in enumerate(query.expressions):
            target = item.this if isinstance(item, exp.Alias) else item
            if is_default(target):
                value = _value(columns, i, defaults)
                alias = item.alias if isinstance(item, exp.Alias) else columns[i]
                item.replace(exp.alias_(value, alias, quoted=True))
    return query


def _value(columns: Sequence[str], i: int, defaults: Mapping[str, str | None]) -> exp.Expression:
    if i >= len(columns):
        raise SqlSyntaxError(f"DEFAULT at position {i + 1} has no target column")
    return default_value(defaults.get(columns[i].lower()))


def replace_assignment(
    value: exp.Expression, column: str, defaults: Mapping[str, str | None]
) -> exp.Expression:
    """``SET column = value``: ``value``, or the column's default for ``DEFAULT``."""
    return default_value(defaults.get(column.lower())) if is_default(value) else value
