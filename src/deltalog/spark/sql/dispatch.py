"""``spark.sql(text)`` for Delta's SQL, on classic sessions and over Spark Connect.

:mod:`deltalog.spark.patches.sql_session` wraps ``SparkSession.sql`` and ``.table``; this module
decides what a statement is. Each statement is parsed (:mod:`deltalog.sql.statements`); one
that is Delta's — it targets ``delta.`path``` or a
name deltalog's catalog holds, or is one of Delta's own statements — runs through deltalog's
APIs and returns the DataFrame delta-spark returns. Everything else reaches Spark's own ``sql``
as the very text it was given.

Queries that *read* Delta tables are handed to Spark with each Delta table reference replaced
by a temporary view over deltalog's read of it (:mod:`deltalog.spark.sql.reads`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql.sql_formatter import SQLStringFormatter
from sqlglot import exp

from deltalog import errors
from deltalog.spark.session import is_connect, spark_sql
from deltalog.spark.sql import alter, commands, ddl, dml, params
from deltalog.spark.sql.common import NOT_DELTA, target_of
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
                return run_bound(spark, text, args, kwargs)
            result = handler(spark, statement)
            if result is not NOT_DELTA:
                return result
        return run_reads(spark, statement.expression, args, kwargs or {})
    if args or kwargs:
        return run_bound(spark, text, args, kwargs)
    return commands.run(spark, statement)


def run_bound(spark: Any, text: str | None, args: Any, kwargs: Any) -> Any:
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
            raise syntax_error(e) from None
        result = execute(spark, statement) if statement is not None else NOT_DELTA
        if result is NOT_DELTA:
            return spark_sql(spark, bound)
        return result
    finally:
        if formatter is not None:
            formatter.clear()


def syntax_error(e: SqlSyntaxError) -> errors.InvalidArgumentError:
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
