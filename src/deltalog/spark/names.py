"""Table names on a Spark session: which Delta table (if any) a name or ``delta.`path``` means.

Where names live depends on the session's catalog. With a Hive metastore
(``enableHiveSupport()``) they are Spark's own entries there, provider ``delta``
(:mod:`deltalog.spark.metastore`), seen by every session and engine on the metastore; names
deltalog recorded in its registry before stay readable. Spark's in-memory catalog dies with
its session, so without a metastore names live in deltalog's registry
(:class:`~deltalog.catalog.Catalog`) under the session's ``spark.sql.warehouse.dir``, which
every session on that warehouse shares. Unqualified names resolve in the session's current
database, as Spark does. A name that is not Delta's goes to Spark.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import sqlglot
from pyspark.sql import SparkSession

from deltalog import errors
from deltalog.catalog import DEFAULT_DATABASE, Catalog, TableEntry, not_found
from deltalog.spark.metastore import MetastoreNames, persistent
from deltalog.spark.session import conf_get
from deltalog.sql.tokens import DIALECT, TableRef, TokenReader

WAREHOUSE_KEY = "spark.sql.warehouse.dir"
_SESSION_CATALOG = "spark_catalog"

# The temporary views over Delta reads that deltalog's SQL creates (hidden from the catalog API).
VIEW_PREFIX = "__deltalog_"


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved Delta table: its path, and its catalog entry when named."""

    path: str
    entry: TableEntry | None = None

    @property
    def display(self) -> str:
        return self.entry.qualified if self.entry is not None else f"delta.`{self.path}`"


def catalog(spark: SparkSession) -> Catalog | MetastoreNames:
    """The names of ``spark``: its metastore's (and the registry's before it) with a Hive
    metastore, else the registry of its warehouse."""
    registry = Catalog(conf_get(spark, WAREHOUSE_KEY, "spark-warehouse"))
    return MetastoreNames(spark, registry) if persistent(spark) else registry


def current_database(spark: SparkSession) -> str:
    try:
        return str(spark.catalog.currentDatabase())
    except Exception:  # a session without a catalog API: Spark's default
        return DEFAULT_DATABASE


def split_name(spark: SparkSession, name: tuple[str, ...]) -> tuple[str, str]:
    """``(database, table)`` of a 1-3 part name (``spark_catalog.db.t``, ``db.t``, ``t``).

    Raises:
        InvalidArgumentError: a name of another catalog or of more parts.
    """
    parts = [p.lower() for p in name]
    if len(parts) == 3 and parts[0] == _SESSION_CATALOG:
        parts = parts[1:]
    if len(parts) == 1:
        return current_database(spark), parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise errors.invalid_argument(f"deltalog names tables in the session catalog: {'.'.join(name)}")


def parse_identifier(text: str) -> TableRef:
    """A table identifier as text (``db.t``, ```t```, ``delta.`/p```) as a :class:`TableRef`."""
    tokens = sqlglot.tokenize(text, read=DIALECT)
    reader = TokenReader(text, tokens, 0)
    ref = reader.table()
    reader.end()
    return ref


def resolve(spark: SparkSession, ref: TableRef) -> Target | None:
    """The Delta table ``ref`` means, or ``None`` when it is a name deltalog does not hold."""
    if ref.path is not None:
        return Target(ref.path)
    if len(ref.name) > 3 or (len(ref.name) == 3 and ref.name[0].lower() != _SESSION_CATALOG):
        return None
    registry = catalog(spark)
    if len(ref.name) == 1 and not registry.has_name(ref.name[0]):
        return None  # not ours in any database: no need to ask for the current one
    database, table = split_name(spark, ref.name)
    entry = registry.lookup(database, table)
    return None if entry is None else Target(entry.location, entry)


def require(spark: SparkSession, ref: TableRef) -> Target:
    """:func:`resolve`, raising when the name is unknown.

    Raises:
        TableNotFoundError: ``TABLE_OR_VIEW_NOT_FOUND``.
    """
    target = resolve(spark, ref)
    if target is None:
        raise not_found(str(ref))
    return target


def resolve_identifier(spark: SparkSession, identifier: str) -> Target | None:
    """:func:`resolve` of an identifier given as text (``forName``, ``saveAsTable``)."""
    return resolve(spark, parse_identifier(identifier))


def new_target(spark: SparkSession, ref: TableRef, location: str | None) -> tuple[Target, bool]:
    """Where a table being created under ``ref`` lives, and whether it is managed (a name
    without ``location``)."""
    if ref.path is not None:
        return Target(ref.path), False
    database, table = split_name(spark, ref.name)
    managed = location is None
    path = catalog(spark).managed_location(database, table) if managed else str(location)
    return Target(path, TableEntry(database, table, path, managed)), managed


def register(spark: SparkSession, target: Target, *, replace: bool = False) -> None:
    """Record a created table's name (nothing for path tables)."""
    if target.entry is not None:
        catalog(spark).register(target.entry, replace=replace)


def like(name: str, pattern: str) -> bool:
    """Spark's table pattern: ``*`` any characters, ``|`` alternatives, case-insensitive."""
    return any(fnmatch.fnmatch(name.lower(), p.strip().lower()) for p in pattern.split("|"))
