"""ALTER TABLE's column and clustering changes and SHOW CREATE TABLE, from SQL to the pure core
(:mod:`deltalog.commands.alter_columns`, :mod:`deltalog.ddl`).

Each returns delta-spark's result: no columns for the ALTER forms, ``createtab_stmt string`` for
SHOW CREATE TABLE; :data:`~deltalog.spark.sql.NOT_DELTA` when the table is not a Delta table
deltalog knows (then Spark runs the statement itself).
"""

from __future__ import annotations

import json
from typing import Any

from deltalog.commands import alter_columns
from deltalog.delta_log import DeltaLog
from deltalog.schema import DataType, parse_schema
from deltalog.spark import names
from deltalog.spark.sql_dml import empty
from deltalog.spark.sql_statements import (
    AlterColumn,
    ClusterBy,
    DropColumns,
    RenameColumn,
    ShowCreateTable,
)


def _target(spark: Any, statement: Any) -> names.Target | None:
    return names.resolve(spark, statement.table)


def alter_column(spark: Any, s: AlterColumn) -> Any:
    from deltalog.spark.sql import NOT_DELTA

    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    data_type = None if s.data_type is None else _data_type(spark, s.data_type)
    change = alter_columns.ColumnChange(s.column, data_type, s.comment, s.position, s.nullable)
    alter_columns.change_column(target.path, change)
    return _done(spark)


def rename_column(spark: Any, s: RenameColumn) -> Any:
    from deltalog.spark.sql import NOT_DELTA

    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    alter_columns.rename_column(target.path, s.column, s.new_name)
    return _done(spark)


def drop_columns(spark: Any, s: DropColumns) -> Any:
    from deltalog.spark.sql import NOT_DELTA

    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    alter_columns.drop_columns(target.path, s.columns, if_exists=s.if_exists)
    return _done(spark)


def cluster_by(spark: Any, s: ClusterBy) -> Any:
    from deltalog.spark.sql import NOT_DELTA

    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    alter_columns.cluster_by(target.path, s.columns)
    return _done(spark)


def show_create_table(spark: Any, s: ShowCreateTable) -> Any:
    """delta-spark's ``SHOW CREATE TABLE``: one row, ``createtab_stmt``. A managed table shows
    no LOCATION; path tables are named ``delta.`path```."""
    from deltalog import ddl
    from deltalog.spark.sql import NOT_DELTA

    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    snapshot = DeltaLog.for_table(target.path).update()
    if target.entry is not None:
        name = target.entry.qualified
        location = None if target.entry.managed else _uri(snapshot.table_root)
    else:
        name = f"delta.`{target.path}`"
        location = _uri(snapshot.table_root)
    text = ddl.show_create_table(snapshot, name, location)
    return spark.createDataFrame([(text,)], "createtab_stmt string")


def _uri(root: str) -> str:
    """Hadoop's spelling of a local table root (``file:/x``), as delta-spark shows it."""
    root = root.rstrip("/")
    if root.startswith("file://"):
        return "file:" + root[len("file://") :]
    return root if ":" in root.split("/", 1)[0] else "file:" + root


def _data_type(spark: Any, text: str) -> DataType:
    """A type's SQL text as deltalog's type (Spark parses it, as for CREATE TABLE)."""
    from deltalog.spark.tables import DeltaTableBuilder

    type_json = DeltaTableBuilder(spark, "create")._type_json(text)
    field = {"name": "c", "type": type_json, "nullable": True, "metadata": {}}
    return parse_schema(json.dumps({"type": "struct", "fields": [field]})).fields[0].type


def _done(spark: Any) -> Any:
    return empty(spark)


RUNNERS: dict[type, Any] = {
    AlterColumn: alter_column,
    RenameColumn: rename_column,
    DropColumns: drop_columns,
    ClusterBy: cluster_by,
    ShowCreateTable: show_create_table,
}
