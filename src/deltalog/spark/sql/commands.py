"""Delta's own SQL statements (DESCRIBE HISTORY/DETAIL, VACUUM, OPTIMIZE, RESTORE, CONVERT TO
DELTA, CLONE, GENERATE, UNSET TBLPROPERTIES, SHOW TBLPROPERTIES/COLUMNS) run through
``DeltaTable``, with delta-spark's result columns:

* DESCRIBE HISTORY / DETAIL: :data:`~deltalog.spark.api.delta_table.HISTORY_SCHEMA` /
  :data:`~deltalog.spark.api.delta_table.DETAIL_SCHEMA`;
* VACUUM: ``path`` — the table's path, or the files a DRY RUN would delete;
* OPTIMIZE: ``path`` and the ``metrics`` struct;
* RESTORE and CLONE: their metrics row;
* SHOW TBLPROPERTIES: ``key``, ``value``; SHOW COLUMNS: ``col_name``;
* ALTER TABLE column changes and CLUSTER BY, SHOW CREATE TABLE: :mod:`deltalog.spark.sql.alter`;
* the others: no columns.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from deltalog import errors
from deltalog.catalog import already_exists
from deltalog.commands.clone import clone
from deltalog.commands.ddl.protocol_change import unset_table_properties
from deltalog.commands.ddl.show import table_properties
from deltalog.paths import location_uri
from deltalog.spark import names
from deltalog.spark.api.delta_table import DeltaTable
from deltalog.spark.api.describe import DETAIL_SCHEMA
from deltalog.spark.commands.manage import convert, timestamp_ms
from deltalog.spark.names import VIEW_PREFIX, like
from deltalog.spark.session import spark_sql
from deltalog.spark.sql import alter
from deltalog.spark.sql.common import empty
from deltalog.sql.statements import (
    Clone,
    ConvertToDelta,
    DescribeDetail,
    DescribeHistory,
    Generate,
    Optimize,
    Restore,
    ShowColumns,
    ShowProperties,
    ShowTables,
    UnsetProperties,
    Vacuum,
)

CLONE_SCHEMA = (
    "source_table_size long, source_num_of_files long, num_removed_files long, "
    "num_copied_files long, removed_files_size long, copied_files_size long"
)
PATH_SCHEMA = "path string"


def run(spark: SparkSession, statement: Any) -> Any:
    """Run one of Delta's own statements; its result DataFrame."""
    handler = _RUNNERS[type(statement)]
    return handler(spark, statement)


def _table(spark: SparkSession, ref: Any) -> Any:
    return DeltaTable.forPath(spark, names.require(spark, ref).path)


def _history(spark: SparkSession, s: DescribeHistory) -> Any:
    return _table(spark, s.table).history(s.limit)


def _detail(spark: SparkSession, s: DescribeDetail) -> Any:
    target = names.require(spark, s.table)
    df = _table(spark, s.table).detail()
    if target.entry is None:
        return df
    row = df.collect()[0].asDict()
    row["name"] = target.entry.qualified  # the catalog's name, as delta-spark shows it
    return spark.createDataFrame([tuple(row[f.name] for f in DETAIL_SCHEMA.fields)], DETAIL_SCHEMA)


def _vacuum(spark: SparkSession, s: Vacuum) -> Any:
    table = _table(spark, s.table)
    result = table.vacuum(s.retain_hours, dryRun=s.dry_run, lite=s.lite)
    if s.dry_run:
        return result
    return spark.createDataFrame([(location_uri(table._log.table_root),)], PATH_SCHEMA)


def _optimize(spark: SparkSession, s: Optimize) -> Any:
    builder = _table(spark, s.table).optimize()
    if s.where:
        builder = builder.where(s.where)
    if s.zorder_by:
        return builder.executeZOrderBy(list(s.zorder_by))
    return builder.executeCompaction()


def _restore(spark: SparkSession, s: Restore) -> Any:
    table = _table(spark, s.table)
    if s.version is not None:
        return table.restoreToVersion(s.version)
    return table.restoreToTimestamp(str(s.timestamp))


def _convert(spark: SparkSession, s: ConvertToDelta) -> Any:
    if s.provider is None or s.table.path is None:
        raise errors.invalid_argument(
            f"CONVERT TO DELTA {s.table}: deltalog converts parquet.`/path` directories",
        )
    quoted = s.table.path.replace("`", "``")
    convert(spark, f"{s.provider}.`{quoted}`", s.partition_schema)
    return empty(spark)


def _clone(spark: SparkSession, s: Clone) -> Any:
    source = names.require(spark, s.source)
    existing = names.resolve(spark, s.target) if s.target.path is None else None
    if existing is not None and s.if_not_exists:
        return spark.createDataFrame([], CLONE_SCHEMA)
    target, _ = names.new_target(spark, s.target, s.location)
    if existing is not None:
        if not s.replace:
            assert existing.entry is not None
            raise already_exists(existing.entry.database, existing.entry.name)
        target = existing
    ms = None if s.timestamp is None else timestamp_ms(spark, s.timestamp)
    result = clone(
        source.path,
        target.path,
        is_shallow=s.shallow,
        version=s.version,
        timestamp_ms=ms,
        replace_target=s.replace,
        properties=s.properties or None,
    )
    names.register(spark, target, replace=existing is not None)
    m = result.metrics
    row = tuple(int(m.get(k, 0)) for k in _CLONE_KEYS)
    return spark.createDataFrame([row], CLONE_SCHEMA)


_CLONE_KEYS = (
    "sourceTableSize",
    "sourceNumOfFiles",
    "numRemovedFiles",
    "numCopiedFiles",
    "removedFilesSize",
    "copiedFilesSize",
)


def _generate(spark: SparkSession, s: Generate) -> Any:
    _table(spark, s.table).generate(s.mode)
    return empty(spark)


def _unset(spark: SparkSession, s: UnsetProperties) -> Any:
    unset_table_properties(names.require(spark, s.table).path, s.keys, if_exists=s.if_exists)
    return empty(spark)


def _show_properties(spark: SparkSession, s: ShowProperties) -> Any:
    props = table_properties(_table(spark, s.table)._log.update())
    if s.key is not None:
        value = props.get(s.key)
        if value is None:
            value = f"Table {s.table} does not have property: {s.key}"
        rows = [(s.key, value)]
    else:
        rows = sorted(props.items())
    return spark.createDataFrame(rows, "key string, value string")


def _show_columns(spark: SparkSession, s: ShowColumns) -> Any:
    snapshot = _table(spark, s.table)._log.update()
    return spark.createDataFrame([(f.name,) for f in snapshot.schema.fields], "col_name string")


def _show_tables(spark: SparkSession, s: ShowTables) -> Any:
    """Spark's answer plus deltalog's names of the database (its own temporary views
    hidden)."""
    database = s.database or names.current_database(spark)
    spark_tables = spark_sql(spark, s.text)
    visible = spark_tables.filter(~spark_tables["tableName"].startswith(VIEW_PREFIX))
    ours = [
        (e.database, e.name, False)
        for e in names.catalog(spark).tables(database)
        if s.pattern is None or like(e.name, s.pattern)
    ]
    if not ours:
        return visible
    return visible.unionByName(spark.createDataFrame(ours, visible.schema))


_RUNNERS: dict[type, Any] = {
    DescribeHistory: _history,
    DescribeDetail: _detail,
    Vacuum: _vacuum,
    Optimize: _optimize,
    Restore: _restore,
    ConvertToDelta: _convert,
    Clone: _clone,
    Generate: _generate,
    UnsetProperties: _unset,
    ShowProperties: _show_properties,
    ShowColumns: _show_columns,
    ShowTables: _show_tables,
    **alter.RUNNERS,
}
