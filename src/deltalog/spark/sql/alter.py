"""ALTER TABLE's column and clustering changes and SHOW CREATE TABLE, from SQL to the pure core
(:mod:`deltalog.commands.ddl.alter_columns`, :mod:`deltalog.commands.ddl.show`).

Each returns delta-spark's result: no columns for the ALTER forms, ``createtab_stmt string`` for
SHOW CREATE TABLE; :data:`~deltalog.spark.sql.dispatch.NOT_DELTA` when the table is not a Delta
table deltalog knows (then Spark runs the statement itself).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from deltalog import errors
from deltalog.catalog import TableEntry
from deltalog.commands.ddl import alter_columns, show
from deltalog.commands.ddl.drop_feature import drop_feature_support
from deltalog.commands.ddl.show import spark_simple_string
from deltalog.commands.ddl.sync_identity import sync_identity
from deltalog.commands.optimize.plan import clustering_columns
from deltalog.delta_log import DeltaLog
from deltalog.log.snapshot import Snapshot
from deltalog.schema import DataType, drop_column_mapping_metadata, parse_schema
from deltalog.spark import names
from deltalog.spark.api.columns import sql_type_json
from deltalog.spark.api.delta_table import read_table
from deltalog.spark.session import conf_get
from deltalog.spark.sql.common import NOT_DELTA, empty, table_ref
from deltalog.spark.sql.dml import check_default
from deltalog.sql.statements import (
    AlterColumn,
    ClusterBy,
    DropColumns,
    DropFeature,
    Parsed,
    RenameColumn,
    SetLocation,
    ShowCreateTable,
)

# delta-spark's conf letting SYNC IDENTITY lower a high-water mark (off by default).
_LOWER_HIGH_WATER_MARK = (
    "spark.databricks.delta.identityColumn.allowSyncIdentityToLowerHighWaterMark.enabled"
)


def _target(spark: SparkSession, statement: Any) -> names.Target | None:
    return names.resolve(spark, statement.table)


def alter_column(spark: SparkSession, s: AlterColumn) -> Any:
    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    if s.sync_identity:
        allow = conf_get(spark, _LOWER_HIGH_WATER_MARK, "false").strip().lower() == "true"
        sync_identity(target.path, ".".join(s.column), _extreme(spark), allow_lowering=allow)
        return _done(spark)
    data_type = None if s.data_type is None else _data_type(spark, s.data_type)
    if s.default is not None:
        field = alter_columns.column_field(
            DeltaLog.for_table(target.path).update().schema, s.column, target.path
        )
        check_default(spark, field.name, s.default, spark_simple_string(field.type))
    change = alter_columns.ColumnChange(
        s.column,
        data_type,
        s.comment,
        s.position,
        s.nullable,
        default=s.default,
        drop_default=s.drop_default,
    )
    alter_columns.change_column(target.path, change)
    return _done(spark)


def _extreme(spark: SparkSession) -> Any:
    """SYNC IDENTITY's question: a column's highest (or lowest) value in a snapshot, asked of
    Spark (one aggregate over the snapshot's files)."""

    def extreme(snapshot: Snapshot, column: str, highest: bool) -> int | None:
        df = read_table(spark, snapshot.table_root, version=snapshot.version)
        agg = F.max(f"`{column}`") if highest else F.min(f"`{column}`")
        value = df.agg(agg).collect()[0][0]
        return None if value is None else int(value)

    return extreme


def rename_column(spark: SparkSession, s: RenameColumn) -> Any:
    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    alter_columns.rename_column(target.path, s.column, s.new_name)
    return _done(spark)


def drop_columns(spark: SparkSession, s: DropColumns) -> Any:
    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    alter_columns.drop_columns(target.path, s.columns, if_exists=s.if_exists)
    return _done(spark)


def drop_feature(spark: SparkSession, s: DropFeature) -> Any:
    """``ALTER TABLE t DROP FEATURE name [TRUNCATE HISTORY]``: delta-spark's
    ``dropFeatureSupport`` (:func:`deltalog.commands.ddl.drop_feature.drop_feature_support`)."""
    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    drop_feature_support(target.path, s.feature, s.truncate_history)
    return _done(spark)


def cluster_by(spark: SparkSession, s: ClusterBy) -> Any:
    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    alter_columns.cluster_by(target.path, s.columns)
    return _done(spark)


def show_create_table(spark: SparkSession, s: ShowCreateTable) -> Any:
    """delta-spark's ``SHOW CREATE TABLE``: one row, ``createtab_stmt``. A managed table shows
    no LOCATION; path tables are named ``delta.`path```."""
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
    text = show.show_create_table(snapshot, name, location)
    return spark.createDataFrame([(text,)], "createtab_stmt string")


def set_location(spark: SparkSession, s: SetLocation) -> Any:
    """``ALTER TABLE name SET LOCATION 'path'``: the name now means the Delta table at
    ``path``, which must have the same schema and partitioning (as delta-spark checks)."""
    target = _target(spark, s)
    if target is None:
        return NOT_DELTA
    if target.entry is None:
        raise errors.UnsupportedFeatureError(
            "DELTA_CANNOT_SET_LOCATION_ON_PATH_IDENTIFIER",
            "Cannot change the location of a path based table.",
            table=target.path,
        )
    old = DeltaLog.for_table(target.path).update()
    new_log = DeltaLog.for_table(s.location)
    new = new_log.update()
    if new.version < 0:
        raise errors.TableNotFoundError(
            "DELTA_MISSING_DELTA_TABLE", f"{s.location} is not a Delta table.", table=s.location
        )
    if _plain_schema(old) != _plain_schema(new):
        raise errors.DeltaWriteError(
            "DELTA_SET_LOCATION_SCHEMA_MISMATCH",
            f"The schema of the new Delta location is different than the current table schema. "
            f"original schema: {old.metadata.schema_string} destination schema: "
            f"{new.metadata.schema_string}",
            table=target.display,
        )
    entry = target.entry
    moved = TableEntry(entry.database, entry.name, new_log.table_root, managed=False)
    names.catalog(spark).register(moved, replace=True)
    return _done(spark)


def _plain_schema(snapshot: Any) -> tuple[Any, ...]:
    """Schema and partitioning without deltalog-internal field metadata (column mapping)."""
    return (
        drop_column_mapping_metadata(snapshot.schema),
        tuple(p.lower() for p in snapshot.metadata.partition_columns),
    )


def describe_table(spark: SparkSession, statement: Parsed) -> Any:
    """``DESCRIBE [TABLE] [EXTENDED | FORMATTED] t`` of a Delta table: Spark's v2 answer
    (``col_name``, ``data_type``, ``comment``), with the partitioning or clustering section;
    EXTENDED adds the table's details as Spark 4 shows a Delta table (catalog, namespace, name,
    type, provider ``delta``, location, properties). Column and partition forms go to Spark
    over deltalog's read (:data:`NOT_DELTA` here)."""
    node = statement.expression
    table = node.this
    style = str(node.args.get("style") or "").upper()
    if style not in ("", "EXTENDED", "FORMATTED") or node.args.get("partition"):
        return NOT_DELTA
    if not isinstance(table, exp.Table):
        return NOT_DELTA
    ref = table_ref(table)
    target = None if ref is None or table.args.get("version") else names.resolve(spark, ref)
    if target is None:
        return NOT_DELTA

    snapshot = DeltaLog.for_table(target.path).update()
    schema = snapshot.schema

    def row(f: Any) -> tuple[str, str, str | None]:
        comment = f.metadata.get("comment")
        return (f.name, spark_simple_string(f.type), None if comment is None else str(comment))

    rows = [row(f) for f in schema.fields]
    for title, columns in (
        ("# Partition Information", snapshot.metadata.partition_columns),
        ("# Clustering Information", clustering_columns(snapshot)),
    ):
        if columns:
            rows += [(title, "", ""), ("# col_name", "data_type", "comment")]
            rows += [
                row(alter_columns.column_field(schema, tuple(c.split(".")), "")) for c in columns
            ]
    if style:
        rows += _details(target, snapshot)
    return spark.createDataFrame(rows, "col_name string, data_type string, comment string")


def _details(target: names.Target, snapshot: Any) -> list[tuple[str, str, str | None]]:
    """DESCRIBE EXTENDED's ``# Detailed Table Information`` of a Delta table."""
    entry = target.entry
    rows: list[tuple[str, str, str | None]] = [
        ("", "", ""),
        ("# Detailed Table Information", "", ""),
    ]
    if entry is not None:
        rows += [
            ("Catalog", "spark_catalog", ""),
            ("Namespace", entry.database, ""),
            ("Database", entry.database, ""),
            ("Table", entry.name, ""),
            ("Type", "MANAGED" if entry.managed else "EXTERNAL", ""),
        ]
    else:
        rows += [("Name", f"delta.`{target.path}`", ""), ("Type", "EXTERNAL", "")]
    rows += [("Provider", "delta", ""), ("Location", _uri(target.path), "")]
    if snapshot.metadata.description:
        rows.append(("Comment", str(snapshot.metadata.description), ""))
    props = ",".join(f"{k}={v}" for k, v in sorted(show.table_properties(snapshot).items()))
    rows.append(("Table Properties", f"[{props}]", ""))
    return rows


def _uri(root: str) -> str:
    """Hadoop's spelling of a local table root (``file:/x``), as delta-spark shows it."""
    root = root.rstrip("/")
    if root.startswith("file://"):
        return "file:" + root[len("file://") :]
    return root if ":" in root.split("/", 1)[0] else "file:" + root


def _data_type(spark: SparkSession, text: str) -> DataType:
    """A type's SQL text as deltalog's type (Spark parses it, as for CREATE TABLE)."""
    type_json = sql_type_json(spark, text)
    field = {"name": "c", "type": type_json, "nullable": True, "metadata": {}}
    return parse_schema(json.dumps({"type": "struct", "fields": [field]})).fields[0].type


def _done(spark: SparkSession) -> Any:
    return empty(spark)


RUNNERS: dict[type, Any] = {
    AlterColumn: alter_column,
    RenameColumn: rename_column,
    DropColumns: drop_columns,
    DropFeature: drop_feature,
    ClusterBy: cluster_by,
    ShowCreateTable: show_create_table,
    SetLocation: set_location,
}
