"""Delta's own commands: ``VACUUM``, ``OPTIMIZE``, ``RESTORE``, ``CONVERT TO DELTA``,
``GENERATE`` and ``CREATE TABLE ... CLONE`` (delta-spark's ``DeltaSqlBase.g4``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot.tokens import TokenType

from deltalog.sql.tokens import TableRef, TokenReader


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


CommandStatement = Vacuum | Optimize | Restore | ConvertToDelta | Generate | Clone


def vacuum(r: TokenReader) -> CommandStatement:
    table = r.table()
    retain = dry = lite = None
    while not r.done():
        if r.accept("RETAIN"):
            retain = r.number()
            r.expect("HOURS")
        elif r.accept("DRY", "RUN"):
            dry = True
        elif r.accept("LITE"):
            lite = True
        elif r.accept("FULL"):
            lite = False
        else:
            r.fail("expected RETAIN n HOURS, DRY RUN, LITE or FULL")
    return Vacuum(table, retain, bool(dry), bool(lite))


def optimize(r: TokenReader) -> CommandStatement:
    table = r.table()
    where = r.rest_until("ZORDER") if r.accept("WHERE") else None
    cols: list[str] = []
    if r.accept("ZORDER", "BY"):
        if r.peek() is not None and r.peek().token_type == TokenType.L_PAREN:  # type: ignore[union-attr]
            cols = r.paren_list()
        else:
            cols = [r.identifier()]
            while r.punct(TokenType.COMMA):
                cols.append(r.identifier())
    r.end()
    return Optimize(table, where, tuple(cols))


def restore(r: TokenReader) -> CommandStatement:
    r.accept("TABLE")
    table = r.table()
    r.accept("TO")
    version, timestamp = r.time_travel()
    if version is None and timestamp is None:
        r.fail("expected VERSION AS OF or TIMESTAMP AS OF")
    r.end()
    return Restore(table, version, timestamp)


def convert(r: TokenReader) -> CommandStatement:
    r.expect("TO", "DELTA")
    table = r.table()
    provider = None
    if table.path is None and len(table.name) == 2:
        provider, table = table.name[0].lower(), TableRef(path=table.name[1])
    r.accept("NO", "STATISTICS")
    schema = None
    if r.accept("PARTITIONED", "BY"):
        if not r.punct(TokenType.L_PAREN):
            r.fail("expected (")
        r.pos -= 1
        inner = r.rest_until()
        schema = inner[1:-1].strip()
    r.end()
    return ConvertToDelta(provider, table, schema)


def generate(r: TokenReader) -> CommandStatement:
    mode = r.identifier()
    r.expect("FOR", "TABLE")
    table = r.table()
    r.end()
    return Generate(mode, table)


def clone(r: TokenReader) -> CommandStatement:
    r.expect("CREATE")
    replace = r.accept("OR", "REPLACE")
    r.expect("TABLE")
    if_not_exists = r.accept("IF", "NOT", "EXISTS")
    target = r.table()
    if r.accept("SHALLOW"):
        shallow = True
    elif r.accept("DEEP"):
        shallow = False
    else:
        shallow = False
    r.expect("CLONE")
    source = r.table()
    version, timestamp = r.time_travel()
    properties: dict[str, str] = {}
    location = None
    while not r.done():
        if r.accept("TBLPROPERTIES"):
            properties = r.properties()
        elif r.accept("LOCATION"):
            location = r.string()
        else:
            r.fail("expected TBLPROPERTIES or LOCATION")
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
