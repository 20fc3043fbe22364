"""Queries that read Delta tables: each Delta table reference becomes a temporary view.

Queries that *read* Delta tables (SELECT, joins, CTEs, ``VERSION AS OF``, ``TIMESTAMP AS OF``,
``table_changes(...)``, views over them, DESCRIBE of a table) are handed to Spark after each
Delta table reference in the parsed query is replaced by a temporary view over deltalog's read
of that table (named ``__deltalog_<hash>``, one per table and version), keeping the
reference's alias. The part of a query's WHERE that data skipping can use is pushed into the
view's read (:func:`pushed_where`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from deltalog import errors
from deltalog.scan.predicate import PredicateSyntaxError, has_opaque, parse_predicate
from deltalog.spark import names
from deltalog.spark.api.delta_table import read_changes, read_table
from deltalog.spark.names import VIEW_PREFIX
from deltalog.spark.session import is_connect, spark_sql
from deltalog.spark.sql.common import NOT_DELTA, is_path, table_ref
from deltalog.sql.statements import DIALECT


def run_reads(
    spark: SparkSession, expression: exp.Expression, args: Any, kwargs: dict[str, Any]
) -> Any:
    """Spark's ``sql`` of ``expression`` with its Delta table references replaced by views;
    :data:`NOT_DELTA` when it has none (then Spark gets the original text)."""
    views: list[str] = []
    rewritten = rewrite_reads(spark, expression, views)
    if rewritten is None:
        return NOT_DELTA
    df = spark_sql(spark, rewritten.sql(dialect=DIALECT), args, **kwargs)
    _drop_views(spark, expression, views)
    return df


def _drop_views(spark: SparkSession, expression: exp.Expression, views: list[str]) -> None:
    """Drop the statement's views once Spark holds its plan: classic sessions analyse
    ``sql`` eagerly; Connect resolves lazily and a view may be named by a view the statement
    creates, so those keep them."""
    if is_connect(spark) or isinstance(expression, exp.Create | exp.Cache):
        return
    for view in views:
        spark.catalog.dropTempView(view)


def query_dataframe(spark: SparkSession, query: exp.Expression) -> DataFrame:
    """A DataFrame of a query expression (Delta tables read through deltalog)."""
    views: list[str] = []
    rewritten = rewrite_reads(spark, query, views)
    df = spark_sql(spark, (rewritten or query).sql(dialect=DIALECT))
    _drop_views(spark, query, views)
    return df


def rewrite_reads(
    spark: SparkSession, expression: exp.Expression, views: list[str]
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
        alias = node.alias or (node.name if in_query and not is_path(node) else None)
        replacement = exp.Table(this=exp.to_identifier(view))
        if alias:
            replacement.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        node.replace(replacement)
    return copy if found else None


def _view_for(spark: SparkSession, node: exp.Table, ctes: set[str]) -> str | None:
    if isinstance(node.this, exp.Anonymous) and node.this.name.lower() == "table_changes":
        return _changes_view(spark, node.this)
    ref = table_ref(node)
    if ref is None or (ref.path is None and len(ref.name) == 1 and ref.name[0].lower() in ctes):
        return None
    target = names.resolve(spark, ref)
    if target is None:
        return None
    version, timestamp = _time_travel(node)
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
    (:mod:`deltalog.spark.read.pushdown`). The query's WHERE still runs on the rows read.
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


def _time_travel(node: exp.Table) -> tuple[int | None, str | None]:
    version = node.args.get("version")
    if version is None:
        return None, None
    value = version.expression
    text = value.name if isinstance(value, exp.Literal) else value.sql(dialect=DIALECT)
    if str(version.this).upper() == "VERSION":
        return int(text), None
    return None, text


def _changes_view(spark: SparkSession, call: exp.Anonymous) -> str:
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


def _register_view(df: DataFrame, path: str, version: Any, timestamp: Any) -> str:
    key = f"{path}|{version}|{timestamp}".encode()
    name = VIEW_PREFIX + hashlib.sha1(key).hexdigest()[:16]
    df.createOrReplaceTempView(name)
    return name


def is_plain(text: str) -> bool:
    """Whether ``text`` is wholly comparisons of columns with literals (no functions)."""
    try:
        return not has_opaque(parse_predicate(text))
    except PredicateSyntaxError:
        return False
