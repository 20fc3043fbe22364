"""``SparkSession.sql`` / ``.table`` and ``DataFrameReader.table`` wrapped for Delta's SQL and
table names, on classic sessions and over Spark Connect; what a statement means is decided by
:mod:`deltalog.spark.sql.dispatch`. Installing this also installs the ``DataFrameWriterV2``
(:mod:`~deltalog.spark.patches.writer_v2`) and catalog (:mod:`~deltalog.spark.patches.catalog`)
wrappers, which know deltalog's table names too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

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
from deltalog.spark.patching import patch_classes, wrap
from deltalog.spark.session import ORIGINAL_SQL, pyspark_classes
from deltalog.spark.sql.common import NOT_DELTA
from deltalog.spark.sql.dispatch import execute, run_bound, syntax_error
from deltalog.sql.statements import SqlSyntaxError, parse


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
                return run_bound(self, sqlQuery, args, kwargs)
            raise syntax_error(e) from None
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
