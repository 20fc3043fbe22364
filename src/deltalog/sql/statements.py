"""Delta's SQL statements, parsed without Spark: what ``spark.sql(text)`` is asked to do.

The parser is `sqlglot <https://github.com/tobymao/sqlglot>`_ with its ``spark`` dialect: it
knows Spark SQL's grammar (DML, CREATE/ALTER, SELECT with ``VERSION AS OF``, MERGE with every
clause kind, ``delta.`path``` names) and keeps a typed AST that can be rewritten and printed
back as Spark SQL. Delta's own statements that sqlglot does not know (DESCRIBE HISTORY/DETAIL,
VACUUM, OPTIMIZE, RESTORE, CONVERT TO DELTA, GENERATE, CLONE, UNSET TBLPROPERTIES, SHOW
TBLPROPERTIES/COLUMNS, MERGE WITH SCHEMA EVOLUTION) are read here from sqlglot's *tokens* by a
small recursive-descent reader following delta-spark's ``DeltaSqlBase.g4`` grammar, so quoting,
string escapes and comments follow Spark's lexer, never a regular expression over raw text.

:func:`parse` returns one of the frozen statement classes of the families
(:mod:`~deltalog.sql.describe`, :mod:`~deltalog.sql.alter_table`, :mod:`~deltalog.sql.commands`;
the reader they share is :mod:`~deltalog.sql.tokens`), a :class:`Parsed` sqlglot expression for
everything else sqlglot understands, or ``None`` when the text is none of these (then Spark
parses it and reports its own errors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from deltalog.sql import alter_table, commands, describe
from deltalog.sql.alter_table import (
    AlterColumn,
    AlterStatement,
    ClusterBy,
    DropColumns,
    DropFeature,
    RenameColumn,
    SetLocation,
    UnsetProperties,
)
from deltalog.sql.commands import (
    Clone,
    CommandStatement,
    ConvertToDelta,
    Generate,
    Optimize,
    Restore,
    Vacuum,
)
from deltalog.sql.describe import (
    DescribeDetail,
    DescribeHistory,
    DescribeStatement,
    ShowColumns,
    ShowCreateTable,
    ShowProperties,
    ShowTables,
)
from deltalog.sql.tokens import DIALECT, SqlSyntaxError, TableRef, TokenReader, word

# The statement classes are imported from here by the Spark layer and the tests.
__all__ = [
    "DIALECT",
    "AlterColumn",
    "Clone",
    "ClusterBy",
    "ConvertToDelta",
    "DescribeDetail",
    "DescribeHistory",
    "DropColumns",
    "DropFeature",
    "Generate",
    "Optimize",
    "Parsed",
    "RenameColumn",
    "Restore",
    "SetLocation",
    "ShowColumns",
    "ShowCreateTable",
    "ShowProperties",
    "ShowTables",
    "SqlSyntaxError",
    "Statement",
    "TableRef",
    "UnsetProperties",
    "Vacuum",
    "parse",
    "property_pair",
]


@dataclass(frozen=True, slots=True)
class Parsed:
    """A statement sqlglot parsed (``expression``); ``schema_evolution`` for ``MERGE WITH
    SCHEMA EVOLUTION``; ``text`` the statement as given (where Spark keeps the user's
    spelling, e.g. a column's DEFAULT)."""

    expression: exp.Expression
    schema_evolution: bool = False
    text: str | None = None


Statement = DescribeStatement | AlterStatement | CommandStatement | Parsed

# Statements Spark alone handles, recognised by their first word without parsing further.
_SPARK_ONLY = frozenset(
    {
        "SET",
        "RESET",
        "USE",
        "CACHE",
        "UNCACHE",
        "CLEAR",
        "REFRESH",
        "ADD",
        "LIST",
        "ANALYZE",
        "MSCK",
        "LOAD",
        "EXPLAIN",
        "DECLARE",
        "EXECUTE",
        "CALL",
    }
)


def parse(text: str) -> Statement | None:
    """The statement in ``text``, or ``None`` when Spark should run it unchanged.

    Raises:
        SqlSyntaxError: the text starts like one of Delta's statements but does not follow
            its grammar.
    """
    try:
        tokens = sqlglot.tokenize(text, read=DIALECT)
    except TokenError:
        return None
    words = [word(t) for t in tokens[:4]]
    if not words or words[0] in _SPARK_ONLY:
        return None
    own = _delta_statement(text, tokens, words)
    if own is not None:
        return own
    return _sqlglot(text)


def _sqlglot(text: str) -> Parsed | None:
    try:
        expressions = sqlglot.parse(text, read=DIALECT, error_level=sqlglot.ErrorLevel.RAISE)
    except (ParseError, TokenError):
        return None
    if len(expressions) != 1 or expressions[0] is None:
        return None
    expression = expressions[0]
    if not isinstance(expression, exp.Expression) or isinstance(expression, exp.Command):
        return None
    return Parsed(expression, text=text)


def _delta_statement(text: str, tokens: list[Token], words: list[str]) -> Statement | None:
    first = words[0]
    second = words[1] if len(words) > 1 else ""
    if first in ("DESCRIBE", "DESC") and second in ("HISTORY", "DETAIL"):
        return describe.describe(TokenReader(text, tokens, 2), second)
    if first == "SHOW":
        start = tokens[0].end + 1
        rest = sqlglot.tokenize(text[start:], read=DIALECT)
        what = word(rest[0]) if rest else ""
        if what == "TABLES":
            return describe.show_tables(TokenReader(text[start:], rest, 1), text)
        if what == "CREATE":
            return describe.show_create(TokenReader(text[start:], rest, 1))
        if what not in ("TBLPROPERTIES", "COLUMNS"):
            return None
        return describe.show(TokenReader(text[start:], rest, 1), what)
    if first == "ALTER" and second == "TABLE":
        return alter_table.alter_table(TokenReader(text, tokens, 0))
    if first == "MERGE" and words[1:4] == ["WITH", "SCHEMA", "EVOLUTION"]:
        parsed = _sqlglot("MERGE " + text[tokens[3].end + 1 :])
        return None if parsed is None else Parsed(parsed.expression, schema_evolution=True)
    if first == "CREATE" and any(word(t) == "CLONE" for t in tokens):
        return commands.clone(TokenReader(text, tokens, 0))
    if tokens[0].token_type == TokenType.COMMAND or first in _COMMANDS:
        handler = _COMMANDS.get(first)
        if handler is None:
            return None
        # sqlglot lexes a statement it does not know as COMMAND + the rest as one string:
        # lex the rest again as tokens.
        start = tokens[0].end + 1
        rest = sqlglot.tokenize(text[start:], read=DIALECT)
        return handler(TokenReader(text[start:], rest, 0))
    return None


_COMMANDS: dict[str, Callable[[TokenReader], Statement]] = {
    "VACUUM": commands.vacuum,
    "OPTIMIZE": commands.optimize,
    "RESTORE": commands.restore,
    "CONVERT": commands.convert,
    "GENERATE": commands.generate,
}


def property_pair(p: exp.Property) -> tuple[str, str]:
    """A ``TBLPROPERTIES`` entry as text: keys quoted or not (``delta.appendOnly``), values
    strings, numbers or booleans (``true``), as Spark's ``propertyKey`` / ``propertyValue``."""
    return _property_text(p.this), _property_text(p.args["value"])


def _property_text(node: Any) -> str:
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Dot | exp.Column):
        return ".".join(_property_text(part) for part in node.flatten())
    if isinstance(node, exp.Identifier | exp.Var):
        return str(node.this)
    return node.sql(dialect=DIALECT)
