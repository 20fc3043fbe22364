"""Delta's SQL statements, parsed without Spark: what ``spark.sql(text)`` is asked to do.

The parser is `sqlglot <https://github.com/tobymao/sqlglot>`_ with its ``spark`` dialect: it
knows Spark SQL's grammar (DML, CREATE/ALTER, SELECT with ``VERSION AS OF``, MERGE with every
clause kind, ``delta.`path``` names) and keeps a typed AST that can be rewritten and printed
back as Spark SQL. Delta's own statements that sqlglot does not know (DESCRIBE HISTORY/DETAIL,
VACUUM, OPTIMIZE, RESTORE, CONVERT TO DELTA, GENERATE, CLONE, UNSET TBLPROPERTIES, SHOW
TBLPROPERTIES/COLUMNS, MERGE WITH SCHEMA EVOLUTION) are read here from sqlglot's *tokens* by a
small recursive-descent reader following delta-spark's ``DeltaSqlBase.g4`` grammar, so quoting,
string escapes and comments follow Spark's lexer, never a regular expression over raw text.

:func:`parse` returns one of the frozen statement classes below, a :class:`Parsed` sqlglot
expression for everything else sqlglot understands, or ``None`` when the text is none of these
(then Spark parses it and reports its own errors).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

DIALECT = "spark"
# sqlglot warns on every statement it hands back as a Command; those are read here.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table in a statement: ``delta.`/path``` or a bare string path (``path``), or a name
    of one to three parts (``name``: ``("db", "t")``)."""

    path: str | None = None
    name: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"delta.`{self.path}`" if self.path is not None else ".".join(self.name)


@dataclass(frozen=True, slots=True)
class DescribeHistory:
    table: TableRef
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeDetail:
    table: TableRef


@dataclass(frozen=True, slots=True)
class Vacuum:
    table: TableRef
    retain_hours: float | None = None
    dry_run: bool = False
    lite: bool = False


@dataclass(frozen=True, slots=True)
class Optimize:
    table: TableRef
    where: str | None = None
    zorder_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Restore:
    table: TableRef
    version: int | None = None
    timestamp: str | None = None


@dataclass(frozen=True, slots=True)
class ConvertToDelta:
    """``CONVERT TO DELTA parquet.`path` [PARTITIONED BY (col type, ...)]``."""

    provider: str | None
    table: TableRef
    partition_schema: str | None = None


@dataclass(frozen=True, slots=True)
class Generate:
    mode: str
    table: TableRef


@dataclass(frozen=True, slots=True)
class Clone:
    target: TableRef
    source: TableRef
    shallow: bool
    replace: bool = False
    if_not_exists: bool = False
    version: int | None = None
    timestamp: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    location: str | None = None


@dataclass(frozen=True, slots=True)
class UnsetProperties:
    table: TableRef
    keys: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class ShowProperties:
    table: TableRef
    key: str | None = None


@dataclass(frozen=True, slots=True)
class ShowColumns:
    table: TableRef


@dataclass(frozen=True, slots=True)
class ShowTables:
    """``SHOW TABLES [IN db] [[LIKE] 'pattern']``: Spark's tables and deltalog's names
    (``text`` is the statement, for Spark's part)."""

    text: str
    database: str | None = None
    pattern: str | None = None


@dataclass(frozen=True, slots=True)
class AlterColumn:
    """``ALTER TABLE t ALTER|CHANGE [COLUMN] c action`` (Spark's ``alterColumnAction``) or
    Hive's ``CHANGE [COLUMN] c c type [COMMENT s] [FIRST|AFTER x]``: ``data_type`` is the
    type's SQL text; ``nullable`` True for DROP NOT NULL, False for SET NOT NULL."""

    table: TableRef
    column: tuple[str, ...]
    data_type: str | None = None
    comment: str | None = None
    position: str | None = None
    nullable: bool | None = None


@dataclass(frozen=True, slots=True)
class RenameColumn:
    table: TableRef
    column: tuple[str, ...]
    new_name: str


@dataclass(frozen=True, slots=True)
class DropColumns:
    table: TableRef
    columns: tuple[tuple[str, ...], ...]
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class ClusterBy:
    """``ALTER TABLE t CLUSTER BY (cols)``; no columns for ``CLUSTER BY NONE``."""

    table: TableRef
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShowCreateTable:
    table: TableRef


@dataclass(frozen=True, slots=True)
class SetLocation:
    """``ALTER TABLE name SET LOCATION 'path'``."""

    table: TableRef
    location: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """A statement sqlglot parsed (``expression``); ``schema_evolution`` for ``MERGE WITH
    SCHEMA EVOLUTION``."""

    expression: exp.Expression
    schema_evolution: bool = False


Statement = (
    DescribeHistory
    | DescribeDetail
    | Vacuum
    | Optimize
    | Restore
    | ConvertToDelta
    | Generate
    | Clone
    | UnsetProperties
    | ShowProperties
    | ShowColumns
    | ShowTables
    | AlterColumn
    | RenameColumn
    | DropColumns
    | ClusterBy
    | ShowCreateTable
    | SetLocation
    | Parsed
)

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


class SqlSyntaxError(ValueError):
    """A Delta statement (recognised by its leading words) that does not follow Delta's
    grammar; the message says where."""


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
    words = [_word(t) for t in tokens[:4]]
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
    return Parsed(expression)


def _word(token: Token) -> str:
    return token.text.upper() if token.token_type not in _QUOTED else ""


_QUOTED = frozenset({TokenType.STRING, TokenType.IDENTIFIER})


def _delta_statement(text: str, tokens: list[Token], words: list[str]) -> Statement | None:
    first = words[0]
    second = words[1] if len(words) > 1 else ""
    if first in ("DESCRIBE", "DESC") and second in ("HISTORY", "DETAIL"):
        return _Reader(text, tokens, 2).describe(second)
    if first == "SHOW":
        start = tokens[0].end + 1
        rest = sqlglot.tokenize(text[start:], read=DIALECT)
        what = _word(rest[0]) if rest else ""
        if what == "TABLES":
            return _Reader(text[start:], rest, 1).show_tables(text)
        if what == "CREATE":
            return _Reader(text[start:], rest, 1).show_create()
        if what not in ("TBLPROPERTIES", "COLUMNS"):
            return None
        return _Reader(text[start:], rest, 1).show(what)
    if first == "ALTER" and second == "TABLE":
        return _Reader(text, tokens, 0).alter_table()
    if first == "MERGE" and words[1:4] == ["WITH", "SCHEMA", "EVOLUTION"]:
        parsed = _sqlglot("MERGE " + text[tokens[3].end + 1 :])
        return None if parsed is None else Parsed(parsed.expression, schema_evolution=True)
    if first == "CREATE" and any(_word(t) == "CLONE" for t in tokens):
        return _Reader(text, tokens, 0).clone()
    if tokens[0].token_type == TokenType.COMMAND or first in _COMMANDS:
        handler = _COMMANDS.get(first)
        if handler is None:
            return None
        # sqlglot lexes a statement it does not know as COMMAND + the rest as one string:
        # lex the rest again as tokens.
        start = tokens[0].end + 1
        rest = sqlglot.tokenize(text[start:], read=DIALECT)
        return handler(_Reader(text[start:], rest, 0))
    return None


_COMMANDS = {
    "VACUUM": lambda r: r.vacuum(),
    "OPTIMIZE": lambda r: r.optimize(),
    "RESTORE": lambda r: r.restore(),
    "CONVERT": lambda r: r.convert(),
    "GENERATE": lambda r: r.generate(),
}


class _Reader:
    """A cursor over sqlglot tokens with the few productions of Delta's grammar."""

    def __init__(self, text: str, tokens: Sequence[Token], pos: int) -> None:
        self.text = text
        self.tokens = tokens
        self.pos = pos

    # -- primitives ------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def at(self, *words: str) -> int:
        """How many tokens spell ``words`` here (sqlglot lexes some phrases, such as
        ``PARTITIONED BY``, as one token); 0 when they do not."""
        wanted, i = list(words), 0
        while wanted:
            t = self.peek(i)
            if t is None:
                return 0
            spelled = _word(t).split()
            if not spelled or spelled != wanted[: len(spelled)]:
                return 0
            del wanted[: len(spelled)]
            i += 1
        return i

    def accept(self, *words: str) -> bool:
        n = self.at(*words)
        self.pos += n
        return n > 0

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.fail(f"expected {' '.join(words)}")

    def done(self) -> bool:
        while self.peek() is not None and self.peek().token_type == TokenType.SEMICOLON:  # type: ignore[union-attr]
            self.pos += 1
        return self.peek() is None

    def end(self) -> None:
        if not self.done():
            self.fail("unexpected input")

    def fail(self, why: str) -> None:
        t = self.peek()
        where = "end of input" if t is None else repr(t.text)
        raise SqlSyntaxError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near {where}: {why}.")

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            self.fail("unexpected end of input")
        self.pos += 1
        return t  # type: ignore[return-value]

    def string(self) -> str:
        t = self.next()
        if t.token_type != TokenType.STRING:
            self.pos -= 1
            self.fail("expected a string literal")
        return t.text

    def number(self) -> float:
        t = self.next()
        if t.token_type != TokenType.NUMBER:
            self.pos -= 1
            self.fail("expected a number")
        return float(t.text)

    def identifier(self) -> str:
        t = self.next()
        if t.token_type in (TokenType.STRING, TokenType.NUMBER) or t.token_type in _PUNCTUATION:
            self.pos -= 1
            self.fail("expected an identifier")
        return t.text

    def rest_until(self, *stops: str) -> str:
        """The original text from here up to (not including) the first of ``stops`` at
        parenthesis depth 0, or the end."""
        start = self.peek()
        if start is None:
            self.fail("expected an expression")
        depth, last = 0, start
        while (t := self.peek()) is not None:
            if depth == 0 and (_word(t) in stops or t.token_type == TokenType.SEMICOLON):
                break
            if t.token_type == TokenType.L_PAREN:
                depth += 1
            elif t.token_type == TokenType.R_PAREN:
                depth -= 1
            last = t
            self.pos += 1
        return self.text[start.start : last.end + 1]  # type: ignore[union-attr]

    def table(self) -> TableRef:
        """``delta.`path```, a string path, or a (qualified) name."""
        t = self.peek()
        if t is not None and t.token_type == TokenType.STRING:
            return TableRef(path=self.string())
        parts = [self.identifier()]
        quoted = False
        while self._punct(TokenType.DOT):
            quoted = self.peek() is not None and self.peek().token_type == TokenType.IDENTIFIER  # type: ignore[union-attr]
            parts.append(self.identifier())
        if len(parts) == 2 and parts[0].lower() == "delta" and quoted:
            return TableRef(path=parts[1])
        return TableRef(name=tuple(parts))

    def paren_list(self) -> list[str]:
        """``(a, b, ...)`` of identifiers or strings."""
        if not self._punct(TokenType.L_PAREN):
            self.fail("expected (")
        out = [self.next().text]
        while self._punct(TokenType.COMMA):
            out.append(self.next().text)
        if not self._punct(TokenType.R_PAREN):
            self.fail("expected )")
        return out

    def properties(self) -> dict[str, str]:
        """``('k' = 'v', ...)``."""
        if not self._punct(TokenType.L_PAREN):
            self.fail("expected (")
        out: dict[str, str] = {}
        while True:
            key = self._property_key()
            self._punct(TokenType.EQ)
            out[key] = self.next().text
            if not self._punct(TokenType.COMMA):
                break
        if not self._punct(TokenType.R_PAREN):
            self.fail("expected )")
        return out

    def _property_key(self) -> str:
        parts = [self.next().text]
        while self._punct(TokenType.DOT):
            parts.append(self.next().text)
        return ".".join(parts)

    def _punct(self, kind: TokenType) -> bool:
        t = self.peek()
        if t is not None and t.token_type == kind:
            self.pos += 1
            return True
        return False

    def time_travel(self) -> tuple[int | None, str | None]:
        if self.accept("VERSION", "AS", "OF"):
            return int(self.number()), None
        if self.accept("TIMESTAMP", "AS", "OF"):
            return None, self.rest_until("TBLPROPERTIES", "LOCATION").strip("'\"")
        return None, None

    # -- statements ------------------------------------------------------------------------

    def describe(self, what: str) -> Statement:
        table = self.table()
        if what == "DETAIL":
            self.end()
            return DescribeDetail(table)
        limit = int(self.number()) if self.accept("LIMIT") else None
        self.end()
        return DescribeHistory(table, limit)

    def show(self, what: str) -> Statement:
        if what == "COLUMNS":
            if not (self.accept("IN") or self.accept("FROM")):
                self.fail("expected IN or FROM")
            table = self.table()
            if self.accept("IN") or self.accept("FROM"):
                table = TableRef(name=(self.identifier(), *table.name))
            self.end()
            return ShowColumns(table)
        table = self.table()
        key = None
        if self.peek() is not None and self.peek().token_type == TokenType.L_PAREN:  # type: ignore[union-attr]
            key = ".".join(self.paren_list())
        self.end()
        return ShowProperties(table, key)

    def show_tables(self, statement: str) -> Statement:
        database = None
        if self.accept("IN") or self.accept("FROM"):
            database = ".".join(self.table().name)
        self.accept("LIKE")
        pattern = None if self.done() else self.string()
        self.end()
        return ShowTables(statement, database, pattern)

    def show_create(self) -> Statement:
        self.expect("TABLE")
        table = self.table()
        self.accept("AS", "SERDE")
        self.end()
        return ShowCreateTable(table)

    def alter_table(self) -> Statement | None:
        """The ALTER TABLE forms sqlglot does not read the way Spark does (column changes,
        CLUSTER BY, UNSET TBLPROPERTIES); ``None`` for the others (sqlglot parses them)."""
        self.expect("ALTER", "TABLE")
        table = self.table()
        action = _word(self.peek()) if self.peek() is not None else ""  # type: ignore[arg-type]
        if action == "UNSET":
            return self.unset_properties(table)
        if action in ("ALTER", "CHANGE"):
            return self.alter_column(table)
        if self.accept("RENAME", "COLUMN"):
            column = self.column_path()
            self.expect("TO")
            new_name = self.identifier()
            self.end()
            return RenameColumn(table, column, new_name)
        if self.accept("DROP", "COLUMNS") or self.accept("DROP", "COLUMN"):
            return self.drop_columns(table)
        if self.accept("SET", "LOCATION"):
            location = self.string()
            self.end()
            return SetLocation(table, location)
        if self.accept("CLUSTER", "BY"):
            columns: tuple[str, ...] = ()
            if not self.accept("NONE"):
                columns = tuple(".".join(c) for c in self.column_paths())
            self.end()
            return ClusterBy(table, columns)
        return None

    def column_path(self) -> tuple[str, ...]:
        parts = [self.identifier()]
        while self._punct(TokenType.DOT):
            parts.append(self.identifier())
        return tuple(parts)

    def column_paths(self) -> list[tuple[str, ...]]:
        """``(a, b.c)`` or ``a, b.c``."""
        paren = self._punct(TokenType.L_PAREN)
        out = [self.column_path()]
        while self._punct(TokenType.COMMA):
            out.append(self.column_path())
        if paren and not self._punct(TokenType.R_PAREN):
            self.fail("expected )")
        return out

    def drop_columns(self, table: TableRef) -> Statement:
        if_exists = self.accept("IF", "EXISTS")
        columns = self.column_paths()
        self.end()
        return DropColumns(table, tuple(columns), if_exists)

    def alter_column(self, table: TableRef) -> Statement:
        hive = _word(self.next()) == "CHANGE"
        self.accept("COLUMN")
        column = self.column_path()
        if self.done():
            return AlterColumn(table, column)
        if self.accept("TYPE"):
            return self._column_end(AlterColumn(table, column, data_type=self.rest_until()))
        if self.accept("SET", "NOT", "NULL"):
            return self._column_end(AlterColumn(table, column, nullable=False))
        if self.accept("DROP", "NOT", "NULL"):
            return self._column_end(AlterColumn(table, column, nullable=True))
        comment, position = self._comment_position()
        if comment is not None or position is not None:
            return self._column_end(AlterColumn(table, column, comment=comment, position=position))
        if not hive:
            self.fail("expected TYPE, COMMENT, FIRST, AFTER, SET NOT NULL or DROP NOT NULL")
        new_name = self.identifier()  # Hive's CHANGE old new type [COMMENT c] [FIRST|AFTER x]
        if new_name.lower() != column[-1].lower():
            raise SqlSyntaxError(
                "[UNSUPPORTED_FEATURE.TABLE_OPERATION] Renaming a column is not supported in "
                "Hive-style ALTER COLUMN; please run RENAME COLUMN instead."
            )
        data_type = self.rest_until("COMMENT", "FIRST", "AFTER")
        nullable = None
        if data_type.upper().endswith("NOT NULL"):
            data_type, nullable = data_type[: -len("NOT NULL")].strip(), False
        comment, position = self._comment_position()
        return self._column_end(
            AlterColumn(table, column, data_type, comment, position, nullable=nullable)
        )

    def _comment_position(self) -> tuple[str | None, str | None]:
        comment = self.string() if self.accept("COMMENT") else None
        position = None
        if self.accept("FIRST"):
            position = "FIRST"
        elif self.accept("AFTER"):
            position = "AFTER " + ".".join(self.column_path())
        return comment, position

    def _column_end(self, statement: AlterColumn) -> Statement:
        self.end()
        return statement

    def unset_properties(self, table: TableRef) -> Statement:
        self.expect("UNSET", "TBLPROPERTIES")
        if_exists = self.accept("IF", "EXISTS")
        keys = list(self.properties_keys())
        self.end()
        return UnsetProperties(table, tuple(keys), if_exists)

    def properties_keys(self) -> list[str]:
        if not self._punct(TokenType.L_PAREN):
            self.fail("expected (")
        keys = [self._property_key()]
        while self._punct(TokenType.COMMA):
            keys.append(self._property_key())
        if not self._punct(TokenType.R_PAREN):
            self.fail("expected )")
        return keys

    def vacuum(self) -> Statement:
        table = self.table()
        retain = dry = lite = None
        while not self.done():
            if self.accept("RETAIN"):
                retain = self.number()
                self.expect("HOURS")
            elif self.accept("DRY", "RUN"):
                dry = True
            elif self.accept("LITE"):
                lite = True
            elif self.accept("FULL"):
                lite = False
            else:
                self.fail("expected RETAIN n HOURS, DRY RUN, LITE or FULL")
        return Vacuum(table, retain, bool(dry), bool(lite))

    def optimize(self) -> Statement:
        table = self.table()
        where = self.rest_until("ZORDER") if self.accept("WHERE") else None
        cols: list[str] = []
        if self.accept("ZORDER", "BY"):
            if self.peek() is not None and self.peek().token_type == TokenType.L_PAREN:  # type: ignore[union-attr]
                cols = self.paren_list()
            else:
                cols = [self.identifier()]
                while self._punct(TokenType.COMMA):
                    cols.append(self.identifier())
        self.end()
        return Optimize(table, where, tuple(cols))

    def restore(self) -> Statement:
        self.accept("TABLE")
        table = self.table()
        self.accept("TO")
        version, timestamp = self.time_travel()
        if version is None and timestamp is None:
            self.fail("expected VERSION AS OF or TIMESTAMP AS OF")
        self.end()
        return Restore(table, version, timestamp)

    def convert(self) -> Statement:
        self.expect("TO", "DELTA")
        table = self.table()
        provider = None
        if table.path is None and len(table.name) == 2:
            provider, table = table.name[0].lower(), TableRef(path=table.name[1])
        self.accept("NO", "STATISTICS")
        schema = None
        if self.accept("PARTITIONED", "BY"):
            if not self._punct(TokenType.L_PAREN):
                self.fail("expected (")
            self.pos -= 1
            inner = self.rest_until()
            schema = inner[1:-1].strip()
        self.end()
        return ConvertToDelta(provider, table, schema)

    def generate(self) -> Statement:
        mode = self.identifier()
        self.expect("FOR", "TABLE")
        table = self.table()
        self.end()
        return Generate(mode, table)

    def clone(self) -> Statement:
        self.expect("CREATE")
        replace = self.accept("OR", "REPLACE")
        self.expect("TABLE")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        target = self.table()
        if self.accept("SHALLOW"):
            shallow = True
        elif self.accept("DEEP"):
            shallow = False
        else:
            shallow = False
        self.expect("CLONE")
        source = self.table()
        version, timestamp = self.time_travel()
        properties: dict[str, str] = {}
        location = None
        while not self.done():
            if self.accept("TBLPROPERTIES"):
                properties = self.properties()
            elif self.accept("LOCATION"):
                location = self.string()
            else:
                self.fail("expected TBLPROPERTIES or LOCATION")
        return Clone(
            target,
            source,
            shallow,
            replace,
            if_not_exists,
            version,
            timestamp,
            properties,
            location,
        )


_PUNCTUATION = frozenset(
    {TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA, TokenType.DOT, TokenType.SEMICOLON}
)
