"""``spark.catalog.listTables``, ``tableExists`` and ``createTable`` that know deltalog's table
names, so the catalog API agrees with ``SHOW TABLES`` and ``spark.table`` (classic and Connect
sessions).

With a Hive metastore, Spark's catalog holds deltalog's names itself
(:mod:`deltalog.spark.metastore`); otherwise they live in deltalog's registry
(:mod:`deltalog.catalog`). The wrappers add the registry's names (``tableType`` ``MANAGED`` or
``EXTERNAL``, as Spark's session catalog reports Delta tables), hide the temporary views
deltalog's SQL reads create, and make ``createTable(name, source="delta", ...)`` a Delta
table's name: Spark alone records it but cannot read it back (a Python data source's catalog
table gets no options, so no path, in PySpark 4.3), which Connect's ``createTable`` does at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pyspark.sql.catalog import Table

from deltalog import errors
from deltalog.catalog import already_exists
from deltalog.spark import names
from deltalog.spark.api.delta_table import DeltaTable
from deltalog.spark.names import VIEW_PREFIX, like
from deltalog.spark.patching import patch_classes, wrap
from deltalog.spark.session import pyspark_classes


def install() -> None:
    """Wrap ``listTables`` and ``tableExists`` of the classic and Connect catalogs. Idempotent."""
    patch_classes(_catalog_classes(), "_deltalog_catalog", _patch)


def _patch(cls: type) -> None:
    wrap(cls, "listTables", _list_tables)
    wrap(cls, "tableExists", _table_exists)
    wrap(cls, "createTable", _create_table)


def _catalog_classes() -> list[type]:
    return pyspark_classes("Catalog", "pyspark.sql.catalog", "pyspark.sql.connect.catalog")


def _list_tables(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def listTables(self: Any, dbName: str | None = None, pattern: str | None = None) -> Any:
        spark = self._sparkSession
        tables = [t for t in original(self, dbName, pattern) if not t.name.startswith(VIEW_PREFIX)]
        database = dbName or names.current_database(spark)
        seen = {(tuple(t.namespace or ()), t.name.lower()) for t in tables}
        for entry in names.catalog(spark).tables(database):
            if pattern is not None and not like(entry.name, pattern):
                continue
            if ((entry.database,), entry.name.lower()) in seen:
                continue
            kind = "MANAGED" if entry.managed else "EXTERNAL"
            tables.append(
                Table(
                    name=entry.name,
                    catalog="spark_catalog",
                    namespace=[entry.database],
                    description=None,
                    tableType=kind,
                    isTemporary=False,
                )
            )
        return tables

    return listTables


def _table_exists(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def tableExists(self: Any, tableName: str, dbName: str | None = None) -> bool:
        identifier = tableName if dbName is None else f"{dbName}.{tableName}"
        try:
            if names.resolve_identifier(self._sparkSession, identifier) is not None:
                return True
        except Exception:  # not a name deltalog can read: Spark decides
            pass
        return bool(original(self, tableName, dbName))

    return tableExists


def _create_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def createTable(
        self: Any,
        tableName: str,
        path: str | None = None,
        source: str | None = None,
        schema: Any = None,
        description: str | None = None,
        **options: str,
    ) -> Any:
        """delta-spark's ``createTable`` for ``source="delta"``: the table at ``path`` (its
        schema from the log) or a new one of ``schema``, named; ``delta.*`` options are table
        properties. The table, read by name.

        Raises:
            DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` for a name in use.
            InvalidArgumentError: an option that is not a ``delta.*`` table property.
        """
        if (source or "").lower() != "delta":
            return original(self, tableName, path, source, schema, description, **options)
        spark = self._sparkSession
        if self.tableExists(tableName):  # a Delta name, a view or another provider's table
            database, name = names.split_name(spark, names.parse_identifier(tableName).name)
            raise already_exists(database, name)
        unknown = sorted(k for k in options if not k.lower().startswith("delta."))
        if unknown:
            raise errors.invalid_argument(
                f"createTable({tableName!r}, source='delta'): options {unknown} are not Delta "
                "table properties (delta.*)"
            )
        builder = DeltaTable.createIfNotExists(spark).tableName(tableName)
        if path is not None:
            builder = builder.location(path)
        if schema is not None:
            builder = builder.addColumns(schema)
        if description is not None:
            builder = builder.comment(description)
        for key, value in options.items():
            builder = builder.property(key, value)
        builder.execute()
        return spark.table(tableName)

    return createTable
