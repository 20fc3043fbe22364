"""Delta table names in Spark's own session catalog, where it persists: a Hive metastore.

A session built with ``enableHiveSupport()`` (``spark.sql.catalogImplementation=hive``) keeps
its tables in a metastore that every session and engine on it shares, so deltalog records its
names there, as delta-spark's ``DeltaCatalog`` does by default: provider ``delta``, the
table's location (``MANAGED`` under the database's folder, ``EXTERNAL`` elsewhere) and no
columns (the log holds the schema; delta-spark loads any entry of provider ``delta`` as the
Delta table at its location). A delta-spark cluster or a plain Spark session on the same
metastore lists and describes the table as Delta's.

Everything goes through Spark's public API, so classic and Connect sessions behave alike:
``SHOW TABLE EXTENDED`` to read an entry (provider, location, type), Spark's own ``CREATE TABLE
... USING delta [LOCATION ...]`` to add one (Spark asks the ``delta`` source for the schema,
which answers with no columns: :func:`deltalog.spark.read.options.from_catalog`), Spark's own
``DROP TABLE`` / ``ALTER TABLE ... RENAME TO`` to remove or move one (Spark deletes or moves a
managed table's folder itself). Spark itself cannot read such a table by name (PySpark 4.3's
``PythonDataSourceV2.getTable`` drops the catalog's properties, so the source gets no path):
deltalog's wrappers of ``spark.sql``, ``spark.table`` and the readers resolve the name first.

Spark refuses to create a managed table over a folder that already has files (SPARK-19724)
and its public API cannot lift that (delta-spark passes ``validateLocation = false`` to the JVM
catalog), while deltalog writes a table's first commit before it names it. So a new managed
table's folder steps aside while Spark creates the entry (and its empty folder), then moves
back: two renames of a folder no name points to yet (a local warehouse; elsewhere the entry is
recorded as ``EXTERNAL`` at the managed location).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass

from pyspark.sql import SparkSession

from deltalog import errors
from deltalog.catalog import Catalog, TableEntry, already_exists, local_path, schema_not_found
from deltalog.spark.session import conf_get, spark_sql

CATALOG_IMPLEMENTATION_KEY = "spark.sql.catalogImplementation"
DELTA_PROVIDER = "delta"


def persistent(spark: SparkSession) -> bool:
    """Whether the session's catalog outlives it (a Hive metastore)."""
    return conf_get(spark, CATALOG_IMPLEMENTATION_KEY, "in-memory").lower() == "hive"


@dataclass(frozen=True, slots=True)
class CatalogTable:
    """What Spark's catalog records of a table: its provider, location and type."""

    database: str
    name: str
    provider: str
    location: str
    managed: bool

    @property
    def is_delta(self) -> bool:
        return self.provider.lower() == DELTA_PROVIDER


def describe(spark: SparkSession, database: str, name: str) -> CatalogTable | None:
    """The catalog's entry of table ``database.name``; ``None`` when there is none (no such
    table or database, or a temporary view of that name, which shadows tables in Spark)."""
    if not _plain(database) or not _plain(name):
        return None
    try:
        # The entries matching one plain name (at most a table and a temporary view).
        rows = spark_sql(
            spark, f"SHOW TABLE EXTENDED IN {_quote(database)} LIKE '{name}'"
        ).collect()
    except Exception as e:
        if _no_such_database(e):
            return None
        raise
    for row in rows:
        if row["tableName"].lower() != name.lower():
            continue
        if row["isTemporary"]:
            return None
        info = _information(row["information"])
        return CatalogTable(
            database.lower(),
            name.lower(),
            info.get("Provider", ""),
            local_path(info.get("Location", "")),
            info.get("Type", "").upper() == "MANAGED",
        )
    return None


def _no_such_database(e: Exception) -> bool:
    """Whether Spark refused a statement because the database does not exist (any other
    failure, e.g. an unreachable metastore, must not read as "no such table")."""
    text = str(e)
    return "SCHEMA_NOT_FOUND" in text or "NoSuchDatabase" in text or "NoSuchNamespace" in text


def table_names(spark: SparkSession, database: str) -> set[str]:
    """The names of the database's tables in the catalog (lower-cased)."""
    try:
        # One row per table name of the database (names only, no data).
        rows = spark_sql(spark, f"SHOW TABLES IN {_quote(database)}").collect()
    except Exception as e:
        if _no_such_database(e):
            return set()
        raise
    return {r["tableName"].lower() for r in rows if not r["isTemporary"]}


def database_location(spark: SparkSession, database: str) -> str:
    """Where the database keeps its managed tables (as the metastore says, which may differ
    from this session's warehouse setting)."""
    return local_path(spark.catalog.getDatabase(database).locationUri)


def create(spark: SparkSession, entry: TableEntry) -> None:
    """Record the Delta table at ``entry.location`` under its name in the catalog, with Spark's
    own ``CREATE TABLE ... USING delta [LOCATION ...]`` (the ``delta`` source answers the
    catalog's schema question with no columns, so the entry is delta-spark's).

    Raises:
        DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` when the catalog has the name.
    """
    if describe(spark, entry.database, entry.name) is not None:
        raise already_exists(entry.database, entry.name)
    name = f"{_quote(entry.database)}.{_quote(entry.name)}"
    folder = entry.location
    if not entry.managed or "://" in folder or not os.path.isdir(folder):
        # DDL: collect() runs it and returns no rows.
        spark_sql(spark, f"CREATE TABLE {name} USING delta LOCATION {_literal(folder)}").collect()
        return
    aside = f"{folder.rstrip('/')}.deltalog-{uuid.uuid4().hex[:8]}"
    os.rename(folder, aside)
    try:
        spark_sql(spark, f"CREATE TABLE {name} USING delta").collect()  # DDL: no rows
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # the empty folder Spark made for the new managed table
        os.rename(aside, folder)


def drop(spark: SparkSession, database: str, name: str) -> None:
    """Spark's ``DROP TABLE`` of the name (Spark deletes a managed table's folder)."""
    spark_sql(spark, f"DROP TABLE {_quote(database)}.{_quote(name)}").collect()  # DDL: no rows


def rename(spark: SparkSession, old: TableEntry, database: str, name: str) -> None:
    """Spark's ``ALTER TABLE ... RENAME TO`` (Spark moves a managed table's folder)."""
    source = f"{_quote(old.database)}.{_quote(old.name)}"
    spark_sql(spark, f"ALTER TABLE {source} RENAME TO {_quote(database)}.{_quote(name)}").collect()


def _information(text: str) -> dict[str, str]:
    """``SHOW TABLE EXTENDED``'s ``information``: ``Key: value`` lines."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key not in out:
            out[key] = value
    return out


def _plain(part: str) -> bool:
    """A name part that needs no escaping in a pattern or a quoted identifier."""
    return bool(part) and not any(c in part for c in "`'*|\\")


def _literal(text: str) -> str:
    """A SQL string literal (Spark's escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quote(part: str) -> str:
    if not _plain(part):
        raise errors.invalid_argument(f"invalid table name part {part!r}")
    return f"`{part}`"


def registry_only(registry: Catalog, spark: SparkSession, database: str) -> list[TableEntry]:
    """The registry's names of ``database`` that the catalog does not hold (names recorded by
    deltalog before it used the metastore, or by sessions without one)."""
    recorded = registry.tables(database)
    if not recorded:  # the usual case: no need to ask Spark
        return []
    held = table_names(spark, database)
    return [e for e in recorded if e.name.lower() not in held]


class MetastoreNames:
    """The names of a session with a metastore: the metastore first, then deltalog's registry
    under the warehouse for the names recorded there before (read, dropped and renamed where
    they are; new names go to the metastore). The registry's interface, so callers need not
    know which one a session has."""

    def __init__(self, spark: SparkSession, registry: Catalog) -> None:
        self.spark = spark
        self.registry = registry

    def lookup(self, database: str, name: str) -> TableEntry | None:
        """The Delta table ``database.name``; ``None`` for another provider's table or none."""
        found = describe(self.spark, database, name)
        if found is None:
            return self.registry.lookup(database, name)
        if not found.is_delta:
            return None
        return TableEntry(found.database, found.name, found.location, found.managed)

    def register(self, entry: TableEntry, *, replace: bool = False) -> None:
        """Name the table at ``entry.location`` in the metastore; with ``replace``, an existing
        name first leaves (an external entry; a managed one keeps its folder and must be the
        same table).

        Raises:
            DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` when the name is taken and not
                ``replace``; ``DELTALOG_METASTORE_MANAGED_MOVE`` to point a managed entry
                elsewhere.
        """
        if self.registry.lookup(entry.database, entry.name) is not None:
            if not replace:
                raise already_exists(entry.database, entry.name)
            self.registry.register(entry, replace=True)
            return
        found = describe(self.spark, entry.database, entry.name) if replace else None
        if found is not None:
            if found.is_delta and _same_path(found.location, entry.location):
                return
            if found.managed:
                raise errors.DeltaWriteError(
                    "DELTALOG_METASTORE_MANAGED_MOVE",
                    f"`{entry.database}`.`{entry.name}` is a managed table of the metastore at "
                    f"{found.location}; its name cannot point to {entry.location}.",
                    table=found.location,
                    help="drop the table first, or create an external table under another name.",
                )
            drop(self.spark, entry.database, entry.name)
        create(self.spark, entry)

    def drop(self, database: str, name: str, *, purge_managed: bool = True) -> TableEntry | None:
        """Remove the name (Spark deletes a managed table's folder); the entry or ``None``."""
        found = self.lookup(database, name)
        if found is None:
            return None
        if self.registry.lookup(database, name) is not None:
            return self.registry.drop(database, name, purge_managed=purge_managed)
        drop(self.spark, database, name)
        return found

    def rename(self, old: TableEntry, database: str, name: str) -> TableEntry:
        """Move the name (Spark moves a managed table's folder); the new entry."""
        if self.registry.lookup(old.database, old.name) is not None:
            return self.registry.rename(old, database, name)
        if describe(self.spark, database, name) is not None:
            raise already_exists(database, name)
        rename(self.spark, old, database, name)
        new = self.lookup(database, name)
        assert new is not None
        return new

    def has_name(self, name: str) -> bool:
        """Always: only asking the metastore about the name can tell."""
        return True

    def tables(self, database: str) -> list[TableEntry]:
        """The registry's names the metastore does not list itself."""
        return registry_only(self.registry, self.spark, database)

    def managed_location(self, database: str, name: str) -> str:
        """Where Spark puts managed table ``database.name``: under the database's folder.

        Raises:
            TableNotFoundError: ``SCHEMA_NOT_FOUND`` (before any file of the table is written).
        """
        try:
            base = database_location(self.spark, database)
        except Exception:  # Spark's AnalysisException: no such database
            raise schema_not_found(database) from None
        return os.path.join(base, name.lower())


def _same_path(a: str, b: str) -> bool:
    return local_path(a).rstrip("/") == local_path(b).rstrip("/")
