"""The ``ALTER TABLE`` forms sqlglot does not read the way Spark does: column changes
(``ALTER|CHANGE COLUMN``, ``RENAME COLUMN``, ``DROP COLUMNS``), ``SET LOCATION``,
``CLUSTER BY``, ``UNSET TBLPROPERTIES`` and ``DROP FEATURE``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokens import TokenType

from deltalog.sql.tokens import SqlSyntaxError, TableRef, TokenReader, word


@dataclass(frozen=True, slots=True)
class AlterColumn:
    """``ALTER TABLE t ALTER|CHANGE [COLUMN] c action`` (Spark's ``alterColumnAction``) or
    Hive's ``CHANGE [COLUMN] c c type [COMMENT s] [FIRST|AFTER x]``: ``data_type`` is the
    type's SQL text; ``nullable`` True for DROP NOT NULL, False for SET NOT NULL; ``default``
    the SQL text of ``SET DEFAULT expr``; ``drop_default`` for ``DROP DEFAULT``;
    ``sync_identity`` for Delta's ``SYNC IDENTITY``."""

    table: TableRef
    column: tuple[str, ...]
    data_type: str | None = None
    comment: str | None = None
    position: str | None = None
    nullable: bool | None = None
    default: str | None = None
    drop_default: bool = False
    sync_identity: bool = False


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
class SetLocation:
    """``ALTER TABLE name SET LOCATION 'path'``."""

    table: TableRef
    location: str


@dataclass(frozen=True, slots=True)
class UnsetProperties:
    table: TableRef
    keys: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropFeature:
    """``ALTER TABLE t DROP FEATURE name [TRUNCATE HISTORY]`` (the name an identifier or a
    string literal, as in delta-spark's grammar)."""

    table: TableRef
    feature: str
    truncate_history: bool = False


AlterStatement = (
    AlterColumn
    | RenameColumn
    | DropColumns
    | ClusterBy
    | SetLocation
    | UnsetProperties
    | DropFeature
)


def alter_table(r: TokenReader) -> AlterStatement | None:
    """The ALTER TABLE forms sqlglot does not read the way Spark does (column changes,
    CLUSTER BY, UNSET TBLPROPERTIES, DROP FEATURE); ``None`` for the others (sqlglot parses
    them)."""
    r.expect("ALTER", "TABLE")
    table = r.table()
    action = word(r.peek()) if r.peek() is not None else ""  # type: ignore[arg-type]
    if action == "UNSET":
        return unset_properties(r, table)
    if action in ("ALTER", "CHANGE"):
        return alter_column(r, table)
    if r.accept("RENAME", "COLUMN"):
        column = r.column_path()
        r.expect("TO")
        new_name = r.identifier()
        r.end()
        return RenameColumn(table, column, new_name)
    if r.accept("DROP", "COLUMNS") or r.accept("DROP", "COLUMN"):
        return drop_columns(r, table)
    if r.accept("DROP", "FEATURE"):
        t = r.peek()
        feature = r.string() if t is not None and t.token_type == TokenType.STRING else None
        feature = feature if feature is not None else r.identifier()
        truncate = r.accept("TRUNCATE", "HISTORY")
        r.end()
        return DropFeature(table, feature, truncate)
    if r.accept("SET", "LOCATION"):
        location = r.string()
        r.end()
        return SetLocation(table, location)
    if r.accept("CLUSTER", "BY"):
        columns: tuple[str, ...] = ()
        if not r.accept("NONE"):
            columns = tuple(".".join(c) for c in r.column_paths())
        r.end()
        return ClusterBy(table, columns)
    return None


def drop_columns(r: TokenReader, table: TableRef) -> AlterStatement:
    if_exists = r.accept("IF", "EXISTS")
    columns = r.column_paths()
    r.end()
    return DropColumns(table, tuple(columns), if_exists)


def alter_column(r: TokenReader, table: TableRef) -> AlterStatement:
    hive = word(r.next()) == "CHANGE"
    r.accept("COLUMN")
    column = r.column_path()
    if r.done():
        return AlterColumn(table, column)
    if r.accept("TYPE"):
        return _column_end(r, AlterColumn(table, column, data_type=r.rest_until()))
    if r.accept("SET", "NOT", "NULL"):
        return _column_end(r, AlterColumn(table, column, nullable=False))
    if r.accept("DROP", "NOT", "NULL"):
        return _column_end(r, AlterColumn(table, column, nullable=True))
    if r.accept("SET", "DEFAULT"):
        return _column_end(r, AlterColumn(table, column, default=r.rest_until()))
    if r.accept("DROP", "DEFAULT"):
        return _column_end(r, AlterColumn(table, column, drop_default=True))
    if r.accept("SYNC", "IDENTITY"):
        return _column_end(r, AlterColumn(table, column, sync_identity=True))
    comment, position = _comment_position(r)
    if comment is not None or position is not None:
        return _column_end(r, AlterColumn(table, column, comment=comment, position=position))
    if not hive:
        r.fail(
            "expected TYPE, COMMENT, FIRST, AFTER, SET|DROP NOT NULL, SET|DROP DEFAULT or "
            "SYNC IDENTITY"
        )
    new_name = r.identifier()  # Hive's CHANGE old new type [COMMENT c] [FIRST|AFTER x]
    if new_name.lower() != column[-1].lower():
        raise SqlSyntaxError(
            "[UNSUPPORTED_FEATURE.TABLE_OPERATION] Renaming a column is not supported in "
            "Hive-style ALTER COLUMN; please run RENAME COLUMN instead."
        )
    data_type = r.rest_until("COMMENT", "FIRST", "AFTER")
    nullable = None
    if data_type.upper().endswith("NOT NULL"):
        data_type, nullable = data_type[: -len("NOT NULL")].strip(), False
    comment, position = _comment_position(r)
    return _column_end(
        r, AlterColumn(table, column, data_type, comment, position, nullable=nullable)
    )


def _comment_position(r: TokenReader) -> tuple[str | None, str | None]:
    comment = r.string() if r.accept("COMMENT") else None
    position = None
    if r.accept("FIRST"):
        position = "FIRST"
    elif r.accept("AFTER"):
        position = "AFTER " + ".".join(r.column_path())
    return comment, position


def _column_end(r: TokenReader, statement: AlterColumn) -> AlterStatement:
    r.end()
    return statement


def unset_properties(r: TokenReader, table: TableRef) -> AlterStatement:
    r.expect("UNSET", "TBLPROPERTIES")
    if_exists = r.accept("IF", "EXISTS")
    keys = list(r.properties_keys())
    r.end()
    return UnsetProperties(table, tuple(keys), if_exists)
