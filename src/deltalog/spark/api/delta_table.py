"""delta-spark's read API, same names: ``DeltaTable.forPath(spark, path).toDF()`` and friends."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import DataFrame as ClassicFrame
from pyspark.sql import types as T

from deltalog import errors
from deltalog.catalog import already_exists, not_found
from deltalog.commands.clone import clone
from deltalog.commands.ddl.create_table import TableSpec, create_table
from deltalog.commands.ddl.drop_feature import drop_feature_support
from deltalog.commands.ddl.protocol_change import add_feature_support, upgrade_table_protocol
from deltalog.commands.manifest import generate
from deltalog.delta_log import DeltaLog
from deltalog.log.snapshot import Snapshot
from deltalog.schema import parse_schema
from deltalog.spark import captured
from deltalog.spark.api import arguments, describe
from deltalog.spark.api.arguments import verify
from deltalog.spark.api.columns import IdentityGenerator, column_json
from deltalog.spark.api.merge_builder import DeltaMergeBuilder
from deltalog.spark.commands.dml import delete, update
from deltalog.spark.commands.manage import convert, timestamp_ms
from deltalog.spark.commands.optimize import DeltaOptimizeBuilder
from deltalog.spark.commands.vacuum import restore, vacuum
from deltalog.spark.read import pushdown
from deltalog.spark.read.changes import read_changes as read
from deltalog.spark.read.scan import read_snapshot
from deltalog.spark.session import configure_log, session_time_zone
from deltalog.spark.storage import register_session
from deltalog.storage.options import from_spark_conf
from deltalog.timestamps import parse_timestamp

if TYPE_CHECKING:
    from deltalog.spark.api.merge_builder import DeltaMergeBuilder
    from deltalog.spark.commands.optimize import DeltaOptimizeBuilder

# deltalog.tables, the public face, re-exports these.
__all__ = ["DeltaTable", "DeltaTableBuilder", "IdentityGenerator", "read_changes", "read_table"]


@captured.surfaces_all
class DeltaTable:
    """A Delta table for reading, as in delta-spark (``delta.tables.DeltaTable``)."""

    def __init__(self, spark: SparkSession, log: DeltaLog, alias: str | None = None) -> None:
        self._spark = spark
        self._log = log
        self._alias = alias

    @classmethod
    def forPath(
        cls,
        sparkSession: SparkSession,
        path: str,
        hadoopConf: dict[str, str] | None = None,
    ) -> DeltaTable:
        """The table at ``path``.

        Raises:
            TableNotFoundError: ``path`` is not a Delta table.
        """
        # Object stores: the session's storage settings and ``hadoopConf``'s fs.s3a.* names.
        register_session(sparkSession, path, from_spark_conf(hadoopConf or {}))
        log = DeltaLog.for_table(path)
        configure_log(sparkSession, log)
        log.update()
        return cls(sparkSession, log)

    @classmethod
    def forName(cls, sparkSession: SparkSession, tableOrViewName: str) -> DeltaTable:
        """The table named ``tableOrViewName`` (``db.t``, ``t`` or ``delta.`/path```) in
        deltalog's catalog (:mod:`deltalog.catalog`).

        Raises:
            TableNotFoundError: ``TABLE_OR_VIEW_NOT_FOUND`` for a name deltalog does not hold.
        """
        # Table names need sqlglot (the spark extra), which paths do not: import on use.
        from deltalog.spark.names import resolve_identifier

        target = resolve_identifier(sparkSession, tableOrViewName)
        if target is None:
            raise not_found(tableOrViewName)
        return cls.forPath(sparkSession, target.path)

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """Whether ``identifier`` (a path, or a table name in deltalog's catalog) holds a
        Delta table."""
        try:
            DeltaLog.for_table(identifier).update()
        except errors.TableNotFoundError:
            return _names_delta_table(sparkSession, identifier)
        return True

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder for a new table (fails if one exists)."""
        return _builder(sparkSession, "create")

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that creates the table unless one exists."""
        return _builder(sparkSession, "create_if_not_exists")

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that replaces an existing table (fails if none)."""
        return _builder(sparkSession, "replace")

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that creates or replaces the table."""
        return _builder(sparkSession, "create_or_replace")

    def toDF(self) -> DataFrame:
        """The current snapshot's rows."""
        pushdown.install()  # filters on the read skip files
        df = read_snapshot(self._spark, self._log.update(), self._log.store)
        return df.alias(self._alias) if self._alias else df

    def alias(self, aliasName: str) -> DeltaTable:
        return DeltaTable(self._spark, self._log, aliasName)

    # -- maintenance: VACUUM and RESTORE ------------------------------------------------------

    def vacuum(
        self, retentionHours: float | None = None, *, dryRun: bool = False, lite: bool = False
    ) -> DataFrame:
        """Delete files no version within the retention needs (default the table's
        ``delta.deletedFileRetentionDuration``); an empty DataFrame, as delta-spark. Extras:
        ``dryRun`` returns the files it would delete (``path``), ``lite`` reads candidates
        from the log instead of listing. A retention below the table's needs
        ``spark.databricks.delta.retentionDurationCheck.enabled=false``."""
        return vacuum(self._spark, self._log, retentionHours, dry_run=dryRun, lite=lite or None)

    def restoreToVersion(self, version: int) -> DataFrame:
        """Make ``version`` the current state (a new commit); delta-spark's metrics row."""
        verify(version, int, "version")
        return restore(self._spark, self._log, version, None)

    def restoreToTimestamp(self, timestamp: str) -> DataFrame:
        """Restore the version current at ``timestamp`` (session time zone when it has none)."""
        verify(timestamp, str, "timestamp")
        return restore(self._spark, self._log, None, timestamp)

    # -- maintenance: CONVERT, CLONE, manifests, protocol and features (issue 12) ---------------

    @classmethod
    def convertToDelta(
        cls,
        sparkSession: SparkSession,
        identifier: str,
        partitionSchema: str | T.StructType | None = None,
    ) -> DeltaTable:
        """Convert the parquet directory ``parquet.`/path` `` in place (partition columns from
        ``partitionSchema``, DDL text or StructType); a Delta table already there is kept."""
        return cls.forPath(sparkSession, convert(sparkSession, identifier, partitionSchema))

    def clone(
        self,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """Clone the latest version to the absolute path ``target`` (shallow: the target points
        at this table's files; deep: they are copied); the clone's DeltaTable."""
        return self._clone(target, isShallow, replace, properties)

    def cloneAtVersion(
        self,
        version: int,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """:meth:`clone` of ``version``."""
        return self._clone(target, isShallow, replace, properties, version=version)

    def cloneAtTimestamp(
        self,
        timestamp: str,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """:meth:`clone` of the version current at ``timestamp`` (session time zone)."""
        ms = timestamp_ms(self._spark, timestamp)
        return self._clone(target, isShallow, replace, properties, timestamp=ms)

    def _clone(
        self,
        target: str,
        shallow: bool,
        replace: bool,
        properties: dict[str, str] | None,
        *,
        version: int | None = None,
        timestamp: int | None = None,
    ) -> DeltaTable:
        clone(
            self._log.table_root,
            target,
            is_shallow=shallow,
            version=version,
            timestamp_ms=timestamp,
            replace_target=replace,
            properties=properties,
        )
        return DeltaTable.forPath(self._spark, target)

    def generate(self, mode: str) -> None:
        """Write manifests; ``symlink_format_manifest`` is the only mode."""
        generate(self._log.table_root, mode)

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """Raise the protocol versions (lower ones are ignored, as in delta-spark)."""
        for value, name in ((readerVersion, "readerVersion"), (writerVersion, "writerVersion")):
            if type(value) is not int:
                raise ValueError(f"The {name} needs to be an integer but got '{type(value)}'.")
        upgrade_table_protocol(self._log.table_root, readerVersion, writerVersion)
        self._log.update()

    def addFeatureSupport(self, featureName: str) -> None:
        """Add a table feature (and the features it depends on) to the protocol."""
        verify(featureName, str, "featureName")
        add_feature_support(self._log.table_root, featureName)
        self._log.update()

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """Drop a table feature from the protocol; see
        :func:`deltalog.commands.ddl.drop_feature.drop_feature_support` for what is supported."""
        verify(featureName, str, "featureName")
        if truncateHistory is not None:
            verify(truncateHistory, bool, "truncateHistory")
        drop_feature_support(self._log.table_root, featureName, bool(truncateHistory))
        self._log.update()

    # -- DML ---------------------------------------------------------------------------------

    def delete(self, condition: str | Column | None = None) -> None:
        """Delete the rows for which ``condition`` (SQL text or Column) is true; every row
        when it is ``None``."""
        delete(self._spark, self._log, condition)

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
    ) -> None:
        """Set columns (``set``: column name → SQL text or Column) on the rows for which
        ``condition`` is true (every row when it is ``None``)."""
        assignments = arguments.column_mapping(set, "'set'")
        arguments.condition(condition)
        if not assignments:
            raise errors.invalid_argument("'set' must be a non-empty dict of column → value")
        update(self._spark, self._log, condition, assignments)

    def updateExpr(
        self, condition: str | None = None, set: Mapping[str, str] | None = None
    ) -> None:
        """:meth:`update` with SQL text (the Scala API's name)."""
        self.update(condition, set)

    def merge(self, source: DataFrame, condition: str | Column) -> DeltaMergeBuilder:
        """A MERGE of ``source`` into this table on ``condition``; add clauses to the
        returned builder, then ``execute()``."""
        if source is None:
            raise ValueError("'source' in merge cannot be None")
        if not isinstance(source, ClassicFrame) and not hasattr(source, "sparkSession"):
            raise TypeError("Type of 'source' in merge must be DataFrame.")
        if condition is None:
            raise ValueError("'condition' in merge cannot be None")
        arguments.condition(condition, "'condition' in merge")
        return DeltaMergeBuilder(self, source, condition)

    # -- OPTIMIZE ----------------------------------------------------------------------------

    def optimize(self) -> DeltaOptimizeBuilder:
        """An OPTIMIZE of this table: add partition filters with ``where``, then
        ``executeCompaction()`` or ``executeZOrderBy(cols)``."""
        return DeltaOptimizeBuilder(self._spark, self._log)

    def history(self, limit: int | None = None) -> DataFrame:
        """Commits newest first, with delta-spark's columns."""
        return describe.history(self._spark, self._log, limit)

    def detail(self) -> DataFrame:
        """One row describing the current version, with delta-spark's columns."""
        return describe.detail(self._spark, self._log)


def _names_delta_table(spark: SparkSession, identifier: str) -> bool:
    """Whether ``identifier`` is a table name (not a path) deltalog's catalog holds."""
    if "/" in identifier or ":" in identifier:
        return False
    try:
        from deltalog.spark.commands.by_name import is_delta_name
    except ImportError:  # sqlglot (the spark extra) missing: no table names
        return False
    return is_delta_name(spark, identifier) and DeltaTable.isDeltaTable(
        spark, DeltaTable.forName(spark, identifier)._log.table_root
    )


def read_table(
    spark: SparkSession,
    path: str,
    *,
    version: int | None = None,
    timestamp: str | int | None = None,
    where: str | None = None,
) -> DataFrame:
    """The rows of the table at ``path``: latest, or as of a version or a timestamp.

    ``where`` (a SQL filter) is applied to the rows, and files that cannot hold a matching row
    (by partition values or min/max/null-count statistics) are never opened.

    Raises:
        InvalidArgumentError: both ``version`` and ``timestamp`` are given.
    """
    if version is not None and timestamp is not None:
        raise errors.invalid_argument("Cannot specify both version and timestamp", table=path)
    register_session(spark, path)
    log = DeltaLog.for_table(path)
    snapshot: Snapshot
    if version is not None:
        snapshot = log.get_snapshot_at(version)
    elif timestamp is not None:
        zone = session_time_zone(spark)
        ms = timestamp if isinstance(timestamp, int) else parse_timestamp(timestamp, zone)
        snapshot = log.get_snapshot_at_timestamp(ms)
    else:
        snapshot = log.update()
    pushdown.install()  # filters on the read skip files
    return read_snapshot(spark, snapshot, log.store, where)


def read_changes(
    spark: SparkSession,
    path: str,
    *,
    starting_version: int | None = None,
    starting_timestamp: str | None = None,
    ending_version: int | None = None,
    ending_timestamp: str | None = None,
) -> DataFrame:
    """The change data feed of the table at ``path`` (delta-spark's ``readChangeFeed`` read),
    through Spark's parquet reader: the table's columns plus ``_change_type``,
    ``_commit_version`` and ``_commit_timestamp``.

    A version bound wins over a timestamp bound for the same end; timestamps without a zone
    are in the session time zone.

    Raises:
        DeltaError: the typed errors of the change feed's version resolution and planning.
    """
    options = {
        "startingVersion": starting_version,
        "startingTimestamp": starting_timestamp,
        "endingVersion": ending_version,
        "endingTimestamp": ending_timestamp,
    }
    given = {k: str(v) for k, v in options.items() if v is not None}
    register_session(spark, path)
    return read(spark, DeltaLog.for_table(path), given)


@captured.surfaces_all
class DeltaTableBuilder:
    """delta-spark's ``DeltaTableBuilder``: columns, partitioning or clustering, properties,
    a comment and a location, then :meth:`execute`. Get one from ``DeltaTable.create(spark)``
    and its siblings."""

    def __init__(self, spark: SparkSession, kind: str) -> None:
        self._spark = spark
        self._kind = kind
        self._name: str | None = None
        self._location: str | None = None
        self._fields: list[dict[str, Any]] = []
        self._partitioned_by: list[str] = []
        self._cluster_by: list[str] = []
        self._properties: dict[str, str] = {}
        self._comment: str | None = None

    def tableName(self, identifier: str) -> DeltaTableBuilder:
        """The table's name in deltalog's catalog: without :meth:`location` a managed table
        under the warehouse, with one an external table."""
        arguments.of_type(identifier, str, "tableName")
        self._name = identifier
        return self

    def location(self, location: str) -> DeltaTableBuilder:
        arguments.of_type(location, str, "location")
        self._location = location
        return self

    def comment(self, comment: str) -> DeltaTableBuilder:
        arguments.of_type(comment, str, "comment")
        self._comment = comment
        return self

    def property(self, key: str, value: str) -> DeltaTableBuilder:
        arguments.of_type(key, str, "property key")
        arguments.of_type(value, str, "property value")
        self._properties[key] = str(value)
        return self

    def partitionedBy(self, *cols: str | list[str]) -> DeltaTableBuilder:
        self._partitioned_by = arguments.column_names(cols, "partitionedBy")
        return self

    def clusterBy(self, *cols: str | list[str]) -> DeltaTableBuilder:
        self._cluster_by = arguments.column_names(cols, "clusterBy")
        return self

    def addColumn(
        self,
        colName: str,
        dataType: str | T.DataType,
        nullable: bool = True,
        generatedAlwaysAs: str | IdentityGenerator | None = None,
        generatedByDefaultAs: IdentityGenerator | None = None,
        comment: str | None = None,
    ) -> DeltaTableBuilder:
        """Add a column; ``generatedAlwaysAs`` is a SQL expression (a generated column) or an
        :class:`IdentityGenerator`; ``generatedByDefaultAs`` an identity that accepts values."""
        self._fields.append(
            column_json(
                self._spark,
                colName,
                dataType,
                nullable,
                generatedAlwaysAs,
                generatedByDefaultAs,
                comment,
            )
        )
        return self

    def addColumns(self, cols: T.StructType | list[T.StructField]) -> DeltaTableBuilder:
        arguments.of_type(cols, (T.StructType, list), "addColumns")
        fields = cols.fields if isinstance(cols, T.StructType) else list(cols)
        for f in fields:
            arguments.of_type(f, T.StructField, "addColumns' fields")
            self._fields.append(json.loads(f.json()))
        return self

    def execute(self) -> DeltaTable:
        """Commit the table.

        Raises:
            InvalidArgumentError: no location, or no columns for a new table.
            DeltaWriteError: see :func:`deltalog.commands.ddl.create_table.create_table`.
        """
        target = self._named_target()
        if target is not None:
            self._location = target.path
        if self._location is None:
            raise errors.invalid_argument(
                "a location or a table name is required: .location('/path/to/table') or "
                ".tableName('db.t')"
            )
        if not self._fields and self._kind != "create_if_not_exists":
            raise errors.invalid_argument("a table needs at least one column (addColumn)")
        schema = parse_schema(json.dumps({"type": "struct", "fields": self._fields}))
        spec = TableSpec(
            schema=schema,
            partition_columns=tuple(self._partitioned_by),
            cluster_by=tuple(self._cluster_by),
            configuration=self._properties,
            description=self._comment,
            name=self._name,
        )
        if self._fields or self._kind != "create_if_not_exists":
            create_table(self._location, self._kind, spec)
        if target is not None and target.entry is not None:
            # Table names need sqlglot (the spark extra), which paths do not: import on use.
            from deltalog.spark.names import catalog

            catalog(self._spark).register(target.entry, replace=True)
        return DeltaTable.forPath(self._spark, self._location)

    def _named_target(self) -> Any:
        """Where a named table lives: its catalog entry's location, else the given location
        (external) or the warehouse (managed); ``None`` without a name."""
        if self._name is None:
            return None
        # Table names need sqlglot (the spark extra), which paths do not: import on use.
        from deltalog.spark.names import Target, new_target, parse_identifier, resolve, split_name

        ref = parse_identifier(self._name)
        existing = resolve(self._spark, ref) if ref.path is None else None
        if existing is not None and existing.entry is not None:
            # By name, Spark's catalog answers before Delta does (as under delta-spark).
            if self._kind == "create":
                raise already_exists(existing.entry.database, existing.entry.name)
            if self._location is None:
                return Target(existing.path, existing.entry)
        elif self._kind == "replace" and ref.path is None:
            database, table = split_name(self._spark, ref.name)
            raise not_found(f"`{database}`.`{table}`")
        return new_target(self._spark, ref, self._location)[0]


def _builder(spark: SparkSession | None, kind: str) -> DeltaTableBuilder:
    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise errors.invalid_argument("no active SparkSession: pass one")
    return DeltaTableBuilder(session, kind)
