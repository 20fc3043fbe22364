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
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

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


# Words that end a column's DEFAULT expression in Spark's column definition (the next option).
_OPTION_WORDS = frozenset({"NOT", "COMMENT", "GENERATED", "CONSTRAINT", "PRIMARY", "CHECK"})


def original_defaults(text: str, parsed: Sequence[exp.Expression]) -> list[str]:
    """The text of each ``DEFAULT expr`` of a CREATE TABLE's column list as the user wrote it
    (Spark keeps that text in ``CURRENT_DEFAULT``), given ``parsed``, the same defaults as
    sqlglot read them, in order. A text that does not read back as its parsed expression is
    replaced by sqlglot's rendering of it, so the result always means what was parsed.
    """
    rendered = [p.sql(dialect=DIALECT) for p in parsed]
    try:
        tokens = sqlglot.tokenize(text, read=DIALECT)
    except sqlglot.errors.TokenError:
        return rendered
    found = _default_texts(text, tokens)
    if len(found) != len(parsed):
        return rendered
    out = []
    for original, expression, fallback in zip(found, parsed, rendered, strict=True):
        try:
            same = sqlglot.parse_one(original, read=DIALECT) == expression
        except sqlglot.errors.ParseError:
            same = False
        out.append(original if same else fallback)
    return out


def _default_texts(text: str, tokens: Sequence[Any]) -> list[str]:
    """The text after each ``DEFAULT`` keyword at depth 1 (a column list), up to the next
    column (``,``), the list's end or the next column option."""
    out: list[str] = []
    depth, i = 0, 0
    while i < len(tokens):
        t = tokens[i]
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif t.token_type == TokenType.DEFAULT and depth == 1:
            end, j, inner = None, i + 1, 0
            while j < len(tokens):
                u = tokens[j]
                if inner == 0 and j > i + 1:
                    stop = u.token_type in (TokenType.COMMA, TokenType.R_PAREN)
                    if stop or u.text.upper() in _OPTION_WORDS:
                        break
                if u.token_type == TokenType.L_PAREN:
                    inner += 1
                elif u.token_type == TokenType.R_PAREN:
                    inner -= 1
                end = u.end
                j += 1
            if end is not None:
                out.append(text[tokens[i + 1].start : end + 1])
            i = j
            continue
        i += 1
    return out
