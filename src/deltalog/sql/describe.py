"""Delta's statements that describe a table: ``DESCRIBE HISTORY|DETAIL``, ``SHOW TBLPROPERTIES``,
``SHOW COLUMNS``, ``SHOW TABLES`` and ``SHOW CREATE TABLE`` (delta-spark's ``DeltaSqlBase.g4``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokens import TokenType

from deltalog.sql.tokens import TableRef, TokenReader


@dataclass(frozen=True, slots=True)
class DescribeHistory:
    table: TableRef
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeDetail:
    table: TableRef


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
class ShowCreateTable:
    table: TableRef


DescribeStatement = (
    DescribeHistory | DescribeDetail | ShowProperties | ShowColumns | ShowTables | ShowCreateTable
)


def describe(r: TokenReader, what: str) -> DescribeStatement:
    table = r.table()
    if what == "DETAIL":
        r.end()
        return DescribeDetail(table)
    limit = int(r.number()) if r.accept("LIMIT") else None
    r.end()
    return DescribeHistory(table, limit)


def show(r: TokenReader, what: str) -> DescribeStatement:
    if what == "COLUMNS":
        if not (r.accept("IN") or r.accept("FROM")):
            r.fail("expected IN or FROM")
        table = r.table()
        if r.accept("IN") or r.accept("FROM"):
            table = TableRef(name=(r.identifier(), *table.name))
        r.end()
        return ShowColumns(table)
    table = r.table()
    key = None
    if r.peek() is not None and r.peek().token_type == TokenType.L_PAREN:  # type: ignore[union-attr]
        key = ".".join(r.paren_list())
    r.end()
    return ShowProperties(table, key)


def show_tables(r: TokenReader, statement: str) -> DescribeStatement:
    database = None
    if r.accept("IN") or r.accept("FROM"):
        database = ".".join(r.table().name)
    r.accept("LIKE")
    pattern = None if r.done() else r.string()
    r.end()
    return ShowTables(statement, database, pattern)


def show_create(r: TokenReader) -> DescribeStatement:
    r.expect("TABLE")
    table = r.table()
    r.accept("AS", "SERDE")
    r.end()
    return ShowCreateTable(table)
