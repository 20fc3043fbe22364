"""``spark.sql(text)`` for Delta's SQL, on classic sessions and over Spark Connect.

:func:`install` wraps ``SparkSession.sql`` and ``SparkSession.table`` of both session classes
(as :mod:`deltalog.spark.patches.dataframe_io` wraps the writers). Each statement is parsed
(:mod:`deltalog.sql.statements`); one that is Delta's — it targets ``delta.`path``` or a
name deltalog's catalog holds, or is one of Delta's own statements — runs through deltalog's
APIs and returns the DataFrame delta-spark returns. Everything else reaches Spark's own ``sql``
as the very text it was given.

Queries that *read* Delta tables are handed to Spark with each Delta table reference replaced
by a temporary view over deltalog's read of it (:mod:`deltalog.spark.sql.reads`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pyspark.sql.sql_formatter import SQLStringFormatter
from sqlglot import exp

from deltalog import errors
from deltalog.spark import captured, names
from deltalog.spark.api.delta_table import read_table
from deltalog.spark.patches import catalog, writer_v2
from deltalog.spark.patches.builders import (
    WRITE_STATE,
    reader_classes,
    reader_session,
    record_builder,
)
from deltalog.spark.patches.patch import patch_classes, wrap
from deltalog.spark.session import is_connect, pyspark_classes
from deltalog.spark.sql import alter, commands, ddl, dml, params
from deltalog.spark.sql.common import NOT_DELTA, ORIGINAL_SQL, spark_sql, target_of
from deltalog.spark.sql.reads import run_reads
from deltalog.sql.statements import Parsed, SqlSyntaxError, parse

# The handlers of the statements sqlglot parses (the rest are Delta's own: ``commands``).
HANDLERS: dict[type, Callable[[Any, Parsed], Any]] = {
    exp.Describe: alter.describe_table,
    exp.Delete: dml.delete,
    exp.Update: dml.update,
    exp.Merge: dml.merge,
    exp.Insert: dml.insert,
    exp.Create: dml.create,
    exp.Alter: ddl.alter,
    exp.Drop: ddl.drop,
}


def install() -> None:
    """Wrap ``SparkSession.sql`` and ``.table`` of the classic and Connect sessions,
    ``DataFrameReader.table``, ``DataFrameWriterV2`` (:mod:`deltalog.spark.patches.writer_v2`)
    and the catalog's ``listTables`` / ``tableExists`` (:mod:`deltalog.spark.patches.catalog`).
    Idempotent."""
    patch_classes(_session_classes(), "_deltalog_sql", _patch_session)
    patch_classes(reader_classes(), "_deltalog_table", _patch_reader)
    writer_v2.install()
    catalog.install()


def _patch_session(cls: type) -> None:
    setattr(cls, ORIGINAL_SQL, getattr(cls, "sql"))  # noqa: B009
    wrap(cls, "sql", _bridged_sql)
    wrap(cls, "table", _bridged_table)


def _patch_reader(cls: type) -> None:
    classic = cls.__module__ == "pyspark.sql.readwriter"
    if classic and not getattr(cls, "_deltalog_bridged", False):
        record_builder(cls)  # classic readers keep options in the JVM only: record them
    wrap(cls, "table", _bridged_reader_table)


def _session_classes() -> list[type]:
    return pyspark_classes("SparkSession", "pyspark.sql", "pyspark.sql.connect.session")


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
        return read_table(self, target.path)

    return table


def _bridged_reader_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def table(self: Any, tableName: str) -> Any:
        """``spark.read.table(name)``, with delta-spark's ``versionAsOf`` / ``timestampAsOf``
        options for a Delta table."""
        spark = reader_session(self)
        try:
            target = names.resolve_identifier(spark, tableName)
        except (SqlSyntaxError, errors.InvalidArgumentError):
            target = None
        if target is None:
            return original(self, tableName)
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
    recorded = reader.__dict__.get(WRITE_STATE, {}).get("options")
    raw = recorded if recorded is not None else getattr(reader, "_options", {}) or {}
    return {str(k).lower(): str(v) for k, v in raw.items()}


def execute(
    spark: Any, statement: Any, args: Any = None, kwargs: Any = None, text: str | None = None
) -> Any:
    """Run ``statement`` (parsed from ``text``) if it is Delta's; :data:`NOT_DELTA` otherwise.

    Delta's own statements are run with their parameter markers bound to ``args`` and
    PySpark's ``{name}`` formatting applied with ``kwargs`` (:mod:`deltalog.spark.sql.params`);
    queries that only read Delta tables give both to Spark's ``sql``."""
    if isinstance(statement, Parsed):
        handler = HANDLERS.get(type(statement.expression))
        if handler is not None:
            if (args or kwargs) and target_of(spark, statement.expression.this):
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
    if is_connect(spark):
        # Connect's client dependencies are optional: only a Connect session gets here.
        from pyspark.sql.connect.sql_formatter import SQLStringFormatter as ConnectFormatter

        return ConnectFormatter(spark)
    return SQLStringFormatter(spark)
