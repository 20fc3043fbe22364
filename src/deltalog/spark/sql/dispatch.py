"""``spark.sql(text)`` for Delta's SQL, on classic sessions and over Spark Connect.

:func:`install` wraps ``SparkSession.sql`` and ``SparkSession.table`` of both session classes
(as :mod:`deltalog.spark.patches.dataframe_io` wraps the writers). Each statement is parsed
(:mod:`deltalog.sql.statements`); one that is Delta's — it targets ``delta.`path``` or a
name deltalog's catalog holds, or is one of Delta's own statements — runs through deltalog's
APIs and returns the DataFrame delta-spark returns. Everything else reaches Spark's own ``sql``
as the very text it was given.

Queries that *read* Delta tables (SELECT, joins, CTEs, ``VERSION AS OF``, ``TIMESTAMP AS OF``,
``table_changes(...)``, views over them, DESCRIBE of a table) are handed to Spark after each
Delta table reference in the parsed query is replaced by a temporary view over deltalog's read
of that table (named ``__deltalog_<hash>``, one per table and version), keeping the
reference's alias.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from deltalog import errors
from deltalog.spark import captured, names
from deltalog.spark.patches.dataframe_io import _reader_classes
from deltalog.spark.session import pyspark_classes
from deltalog.sql.statements import DIALECT, Parsed, SqlSyntaxError, TableRef, parse

_ORIGINAL = "_deltalog_original_sql"
VIEW_PREFIX = "__deltalog_"


def install() -> None:
    """Wrap ``SparkSession.sql`` and ``.table`` of the classic and Connect sessions,
    ``DataFrameWriterV2`` (:mod:`deltalog.spark.patches.writer_v2`) and the catalog's
    ``listTables`` / ``tableExists`` (:mod:`deltalog.spark.patches.catalog`). Idempotent."""
    for cls in _session_classes():
        if getattr(cls, "_deltalog_sql", False):
            continue
        original = getattr(cls, "sql")  # noqa: B009
        setattr(cls, _ORIGINAL, original)
        setattr(cls, "sql", _bridged_sql(original))  # noqa: B010
        setattr(cls, "table", _bridged_table(getattr(cls, "table")))  # noqa: B009, B010
        setattr(cls, "_deltalog_sql", True)  # noqa: B010
    for reader in _reader_classes():
        if getattr(reader, "_deltalog_table", False):
            continue
        classic = reader.__module__ == "pyspark.sql.readwriter"
        if classic and not getattr(reader, "_deltalog_bridged", False):
            from deltalog.spark.patches.dataframe_io import _wrap_builder

            _wrap_builder(reader)  # classic readers keep options in the JVM only: record them
        setattr(reader, "table", _bridged_reader_table(getattr(reader, "table")))  # noqa: B009, B010
        setattr(reader, "_deltalog_table", True)  # noqa: B010
    from deltalog.spark.patches import catalog, writer_v2

    writer_v2.install()
    catalog.install()


def _session_classes() -> list[type]:
    return pyspark_classes("SparkSession", "pyspark.sql", "pyspark.sql.connect.session")


def spark_sql(spark: Any, text: str, args: Any = None, **kwargs: Any) -> Any:
    """Spark's own ``sql`` (never deltalog's), for text that is ready for Spark."""
    original = getattr(type(spark), _ORIGINAL, None) or type(spark).sql
    return original(spark, text, args, **kwargs)


def _bridged_sql(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def sql(self: Any, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:
        try:
            statement = parse(sqlQuery) if isinstance(sqlQuery, str) else None
        except SqlSyntaxError as e:
            if args or kwargs:  # a marker or {name} where Delta's grammar takes a literal
                return _run_bound(self, sqlQuery, args, kwargs)
            raise _syntax_error(e) from None
        if statement is None:
            return original(self, sqlQuery, args, **kwargs)
        result = execute(self, statement, args, kwargs, sqlQuery)
        if result is NOT_DELTA:
            return original(self, sqlQuery, args, **kwargs)
        return result

    return sql


def _bridged_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def table(self: Any, tableName: str) -> Any:
        try:
            target = names.resolve_identifier(self, tableName)
        except (SqlSyntaxError, errors.InvalidArgumentError):
            target = None
        if target is None:
            return original(self, tableName)
        from deltalog.spark.api.delta_table import read_table

        return read_table(self, target.path)

    return table


def _bridged_reader_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def table(self: Any, tableName: str) -> Any:
        """``spark.read.table(name)``, with delta-spark's ``versionAsOf`` / ``timestampAsOf``
        options for a Delta table."""
        from deltalog.spark.patches.dataframe_io import reader_session

        spark = reader_session(self)
        try:
            target = names.resolve_identifier(spark, tableName)
        except (SqlSyntaxError, errors.InvalidArgumentError):
            target = None
        if target is None:
            return original(self, tableName)
        from deltalog.spark.api.delta_table import read_table

        options = _reader_options(self)
        version = options.get("versionasof")
        return read_table(
            spark,
            target.path,
            version=None if version is None else int(version),
            timestamp=options.get("timestampasof"),
        )

    return table


def _reader_options(reader: Any) -> dict[str, str]:
    """A reader's options, lower-cased keys (the bridge's record, else Connect's own dict)."""
    recorded = reader.__dict__.get("_deltalog_write_state", {}).get("options")
    raw = recorded if recorded is not None else getattr(reader, "_options", {}) or {}
    return {str(k).lower(): str(v) for k, v in raw.items()}


NOT_DELTA = object()  # execute's answer for a statement Spark runs unchanged


def execute(
    spark: Any, statement: Any, args: Any = None, kwargs: Any = None, text: str | None = None
) -> Any:
    """Run ``statement`` (parsed from ``text``) if it is Delta's; :data:`NOT_DELTA` otherwise.

    Delta's own statements are run with their parameter markers bound to ``args`` and
    PySpark's ``{name}`` formatting applied with ``kwargs`` (:mod:`deltalog.spark.sql.params`);
    queries that only read Delta tables give both to Spark's ``sql``."""
    from deltalog.spark.sql import commands, dml

    if isinstance(statement, Parsed):
        handler = dml.HANDLERS.get(type(statement.expression))
        if handler is not None:
            if (args or kwargs) and dml.target_of(spark, statement.expression.this):
                return _run_bound(spark, text, args, kwargs)
            result = handler(spark, statement)
            if result is not NOT_DELTA:
                return result
        return run_reads(spark, statement.expression, args, kwargs or {})
    if args or kwargs:
        return _run_bound(spark, text, args, kwargs)
    return commands.run(spark, statement)


def _run_bound(spark: Any, text: str | None, args: Any, kwargs: Any) -> Any:
    """A Delta statement with ``kwargs`` formatted in (PySpark's formatter) and its markers
    bound to ``args``, run on its own."""
    from deltalog.spark.sql import params

    if text is None:
        raise errors.InternalError("DELTALOG_SQL_TEXT", "a statement with parameters lost its text")
    formatter = None
    if kwargs:
        formatter = _formatter(spark)
        text = formatter.format(text, **kwargs)
    try:
        bound = params.bind(text, args, spark) if args else text
        try:
            statement = parse(bound)
        except SqlSyntaxError as e:
            raise _syntax_error(e) from None
        result = execute(spark, statement) if statement is not None else NOT_DELTA
        if result is NOT_DELTA:
            return spark_sql(spark, bound)
        return result
    finally:
        if formatter is not None:
            formatter.clear()


def _syntax_error(e: SqlSyntaxError) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError("PARSE_SYNTAX_ERROR", str(e))


def _formatter(spark: Any) -> Any:
    """PySpark's ``{name}`` formatter for ``spark.sql(text, **kwargs)`` (classic sessions: on
    Connect a DataFrame argument lives in the command only, so Delta's statements take
    literal values only)."""
    from deltalog.spark.session import is_connect

    if is_connect(spark):
        from pyspark.sql.connect.sql_formatter import SQLStringFormatter as ConnectFormatter

        return ConnectFormatter(spark)
    from pyspark.sql.sql_formatter import SQLStringFormatter

    return SQLStringFormatter(spark)


# -- reads: Delta tables in a query become temporary views -------------------------------------


def run_reads(spark: Any, expression: exp.Expression, args: Any, kwargs: dict[str, Any]) -> Any:
    """Spark's ``sql`` of ``expression`` with its Delta table references replaced by views;
    :data:`NOT_DELTA` when it has none (then Spark gets the original text)."""
    views: list[str] = []
    rewritten = rewrite_reads(spark, expression, views)
    if rewritten is None:
        return NOT_DELTA
    df = spark_sql(spark, rewritten.sql(dialect=DIALECT), args, **kwargs)
    _drop_views(spark, expression, views)
    return df


def _drop_views(spark: Any, expression: exp.Expression, views: list[str]) -> None:
    """Drop the statement's views once Spark holds its plan: classic sessions analyse
    ``sql`` eagerly; Connect resolves lazily and a view may be named by a view the statement
    creates, so those keep them."""
    from deltalog.spark.session import is_connect

    if is_connect(spark) or isinstance(expression, exp.Create | exp.Cache):
        return
    for view in views:
        spark.catalog.dropTempView(view)


def query_dataframe(spark: Any, query: exp.Expression) -> Any:
    """A DataFrame of a query expression (Delta tables read through deltalog)."""
    views: list[str] = []
    rewritten = rewrite_reads(spark, query, views)
    df = spark_sql(spark, (rewritten or query).sql(dialect=DIALECT))
    _drop_views(spark, query, views)
    return df


def rewrite_reads(
    spark: Any, expression: exp.Expression, views: list[str]
) -> exp.Expression | None:
    """A copy of ``expression`` with every Delta table read replaced by a temporary view
    (their names appended to ``views``), or ``None`` when there is none."""
    ctes = {c.alias_or_name.lower() for c in expression.find_all(exp.CTE)}
    found = False
    copy = expression.copy()
    for node in list(copy.find_all(exp.Table)):
        view = _view_for(spark, node, ctes)
        if view is None:
            continue
        found = True
        views.append(view)
        # Keep the name columns are qualified with, where a query names its tables (FROM,
        # JOIN); elsewhere (DESCRIBE t) Spark takes no alias.
        in_query = isinstance(node.parent, exp.From | exp.Join)
        alias = node.alias or (node.name if in_query and not _is_path(node) else None)
        replacement = exp.Table(this=exp.to_identifier(view))
        if alias:
            replacement.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        node.replace(replacement)
    return copy if found else None


def _view_for(spark: Any, node: exp.Table, ctes: set[str]) -> str | None:
    if isinstance(node.this, exp.Anonymous) and node.this.name.lower() == "table_changes":
        return _changes_view(spark, node.this)
    ref = table_ref(node)
    if ref is None or (ref.path is None and len(ref.name) == 1 and ref.name[0].lower() in ctes):
        return None
    target = names.resolve(spark, ref)
    if target is None:
        return None
    version, timestamp = _time_travel(node)
    from deltalog.spark.api.delta_table import read_table

    df = read_table(spark, target.path, version=version, timestamp=timestamp)
    pushed = pushed_where(node, df.columns)
    if pushed is None:
        return _register_view(df, target.path, version, timestamp)
    return _register_view(df.where(pushed), target.path, version, f"{timestamp}|{pushed}")


def pushed_where(node: exp.Table, columns: list[str]) -> str | None:
    """The part of the WHERE of the query reading ``node`` that data skipping can use, as SQL
    over the table's own columns (``None``: nothing to push).

    Only a SELECT whose FROM and JOINs are this table alone or inner (or cross) joins qualifies
    (no outer, semi or anti join, no lateral view), and only its conjuncts that compare the
    table's columns with literals; across a join, only columns qualified by the table's alias
    or name. For such a query, filtering the table's rows by them first is exactly what the
    WHERE does, and the view built so skips files by the log's statistics
    (:mod:`deltalog.spark.patches.pushdown`). The query's WHERE still runs on the rows read.
    """
    select = node.parent.parent if isinstance(node.parent, exp.From | exp.Join) else None
    if not isinstance(select, exp.Select) or select.args.get("laterals"):
        return None
    joins = select.args.get("joins") or []
    for join in joins:
        kind = str(join.args.get("kind") or "").upper()
        if join.args.get("side") or kind not in ("", "INNER", "CROSS"):
            return None
    where = select.args.get("where")
    if where is None:
        return None
    qualifiers = {node.alias_or_name.lower()}
    known = {c.lower() for c in columns}
    condition = where.this.unnest()
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    owned = (_own_conjunct(c, qualifiers, known, qualified=bool(joins)) for c in conjuncts)
    parts = [p for p in owned if p]
    return " AND ".join(f"({p})" for p in parts) or None


def _own_conjunct(
    conjunct: Any, qualifiers: set[str], known: set[str], *, qualified: bool
) -> str | None:
    from deltalog.spark.patches.pushdown import is_plain

    copy = conjunct.unnest().copy()
    cols = list(copy.find_all(exp.Column))
    if not cols or copy.find(exp.Select) is not None:
        return None
    for col in cols:
        if (col.table and col.table.lower() not in qualifiers) or col.name.lower() not in known:
            return None  # another relation's column, or an outer query's (correlated)
        if qualified and not col.table:
            return None  # across a join an unqualified name may be the other table's
        for part in ("table", "db", "catalog"):
            col.set(part, None)
    text = copy.sql(dialect=DIALECT)
    return text if is_plain(text) else None


def table_ref(node: exp.Table) -> TableRef | None:
    """The :class:`TableRef` of a sqlglot table (``None`` for a function or subquery)."""
    if not isinstance(node.this, exp.Identifier):
        return None
    if _is_path(node):
        return TableRef(path=node.name)
    parts = [p.name for p in node.parts]
    return TableRef(name=tuple(parts))


def _is_path(node: exp.Table) -> bool:
    db = node.args.get("db")
    this = node.this
    return (
        db is not None
        and not node.args.get("catalog")
        and db.name.lower() == "delta"
        and isinstance(this, exp.Identifier)
        and bool(this.quoted)
    )


def _time_travel(node: exp.Table) -> tuple[int | None, str | None]:
    version = node.args.get("version")
    if version is None:
        return None, None
    value = version.expression
    text = value.name if isinstance(value, exp.Literal) else value.sql(dialect=DIALECT)
    if str(version.this).upper() == "VERSION":
        return int(text), None
    return None, text


def _changes_view(spark: Any, call: exp.Anonymous) -> str:
    from deltalog.spark.api.delta_table import read_changes

    values = [
        a.name if isinstance(a, exp.Literal) else a.sql(dialect=DIALECT) for a in call.expressions
    ]
    if len(values) < 2:
        raise errors.invalid_argument("table_changes(table, start[, end]) needs a start")
    target = names.require(spark, names.parse_identifier(values[0]))
    bounds: dict[str, Any] = {}
    for (v_key, t_key), value in zip(
        (("starting_version", "starting_timestamp"), ("ending_version", "ending_timestamp")),
        values[1:3],
        strict=False,
    ):
        if value.lstrip("-").isdigit():
            bounds[v_key] = int(value)
        else:
            bounds[t_key] = value
    df = read_changes(spark, target.path, **bounds)
    return _register_view(df, target.path, "changes", repr(sorted(bounds.items())))


def _register_view(df: Any, path: str, version: Any, timestamp: Any) -> str:
    key = f"{path}|{version}|{timestamp}".encode()
    name = VIEW_PREFIX + hashlib.sha1(key).hexdigest()[:16]
    df.createOrReplaceTempView(name)
    return name
