"""``spark.catalog.listTables`` and ``tableExists`` that know deltalog's table names, so the
catalog API agrees with ``SHOW TABLES`` and ``spark.table`` (classic and Connect sessions).

deltalog's names live in its own registry (:mod:`deltalog.catalog`); Spark's catalog does not
hold them. The wrappers add them (``tableType`` ``MANAGED`` or ``EXTERNAL``, as Spark's session
catalog reports Delta tables) and hide the temporary views deltalog's SQL reads create.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pyspark.sql.catalog import Table

from deltalog.spark import names
from deltalog.spark.names import VIEW_PREFIX, like
from deltalog.spark.patching import patch_classes, wrap
from deltalog.spark.session import pyspark_classes


def install() -> None:
    """Wrap ``listTables`` and ``tableExists`` of the classic and Connect catalogs. Idempotent."""
    patch_classes(_catalog_classes(), "_deltalog_catalog", _patch)


def _patch(cls: type) -> None:
    wrap(cls, "listTables", _list_tables)
    wrap(cls, "tableExists", _table_exists)


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
