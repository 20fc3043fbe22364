"""Table names for Delta tables: a registry of name → location kept under the warehouse.

Spark's built-in session catalog lives in memory unless the session has Hive support, and it
cannot hand a name to a Python data source (checked on PySpark 4.3: ``CREATE TABLE t USING
delta LOCATION '/p'`` makes Spark instantiate the source with the catalog's own options), so
deltalog keeps its own names: one small JSON file per table at
``<warehouse>/.deltalog_catalog/<database>/<table>.json``. Every session pointing at the same
``spark.sql.warehouse.dir`` sees the same names.

Managed tables live where Spark puts them: ``<warehouse>/<table>`` in the ``default``
database, ``<warehouse>/<database>.db/<table>`` elsewhere. Names are case-insensitive, as in
Spark's session catalog.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deltalog import errors

CATALOG_DIR = ".deltalog_catalog"
DEFAULT_DATABASE = "default"


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A named Delta table: its database, name, location, and whether the catalog owns its
    files (managed) or only the name (external)."""

    database: str
    name: str
    location: str
    managed: bool

    @property
    def qualified(self) -> str:
        return f"spark_catalog.{self.database}.{self.name}"


def local_path(uri: str) -> str:
    """A warehouse setting (``file:/x``, ``file:///x`` or ``/x``) as a local path."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    return uri


class Catalog:
    """The names under one warehouse directory."""

    def __init__(self, warehouse: str) -> None:
        self.warehouse = local_path(warehouse)
        self._root = Path(self.warehouse) / CATALOG_DIR

    def managed_location(self, database: str, name: str) -> str:
        """Where a managed table ``database.name`` keeps its files."""
        base = Path(self.warehouse)
        db = database.lower()
        folder = base if db == DEFAULT_DATABASE else base / f"{db}.db"
        return str(folder / name.lower())

    def lookup(self, database: str, name: str) -> TableEntry | None:
        """The entry of ``database.name``, or ``None``."""
        try:
            data = json.loads(self._file(database, name).read_text())
        except FileNotFoundError:
            return None
        return TableEntry(data["database"], data["name"], data["location"], data["managed"])

    def register(self, entry: TableEntry, *, replace: bool = False) -> None:
        """Add ``entry`` (or overwrite an existing one with ``replace``).

        Raises:
            DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` when the name is taken and not
                ``replace``.
        """
        target = self._file(entry.database, entry.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(
            {
                "database": entry.database.lower(),
                "name": entry.name.lower(),
                "location": entry.location,
                "managed": entry.managed,
            }
        )
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(body)
        try:
            if replace:
                os.replace(tmp, target)
                return
            try:
                os.link(tmp, target)  # atomic "create if absent"
            except FileExistsError:
                raise already_exists(entry.database, entry.name) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def drop(self, database: str, name: str, *, purge_managed: bool = True) -> TableEntry | None:
        """Remove the name (and a managed table's files); the removed entry or ``None``."""
        entry = self.lookup(database, name)
        if entry is None:
            return None
        self._file(database, name).unlink(missing_ok=True)
        if entry.managed and purge_managed:
            shutil.rmtree(local_path(entry.location), ignore_errors=True)
        return entry

    def rename(self, old: TableEntry, database: str, name: str) -> TableEntry:
        """Move ``old``'s name to ``database.name``; a managed table's folder moves to the new
        name's place under the warehouse (as Spark's session catalog does), an external table
        stays where it is. The new entry.

        Raises:
            DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` when the new name is taken.
        """
        if self.lookup(database, name) is not None:
            raise already_exists(database, name)
        location = self.managed_location(database, name) if old.managed else old.location
        if old.managed:
            os.makedirs(os.path.dirname(location), exist_ok=True)
            os.rename(local_path(old.location), location)
        new = TableEntry(database.lower(), name.lower(), location, old.managed)
        self.register(new)
        self.drop(old.database, old.name, purge_managed=False)
        return new

    def has_name(self, name: str) -> bool:
        """Whether any database has a table ``name`` (a cheap check before resolving an
        unqualified name, which needs the session's current database)."""
        if not self._root.is_dir() or not name or "/" in name or name.startswith("."):
            return False
        return any(self._root.glob(f"*/{glob.escape(name.lower())}.json"))

    def tables(self, database: str) -> list[TableEntry]:
        """Every entry of ``database``, by name."""
        folder = self._root / database.lower()
        if not folder.is_dir():
            return []
        found = (self.lookup(database, p.stem) for p in sorted(folder.glob("*.json")))
        return [e for e in found if e is not None]

    def _file(self, database: str, name: str) -> Path:
        for part in (database, name):
            if not part or "/" in part or part.startswith("."):
                raise errors.invalid_argument(f"invalid table name part {part!r}")
        return self._root / database.lower() / f"{name.lower()}.json"


def already_exists(database: str, name: str) -> errors.DeltaWriteError:
    return errors.DeltaWriteError(
        "TABLE_OR_VIEW_ALREADY_EXISTS",
        f"Cannot create table or view `{database}`.`{name}` because it already exists.",
        help="choose another name, drop the existing table first, or use CREATE OR REPLACE "
        "or IF NOT EXISTS.",
    )


def not_found(name: str) -> errors.TableNotFoundError:
    return errors.TableNotFoundError(
        "TABLE_OR_VIEW_NOT_FOUND",
        f"The table or view {name} cannot be found.",
        help="check the name and the current database, or create the table first.",
    )


def schema_not_found(database: str) -> errors.TableNotFoundError:
    return errors.TableNotFoundError(
        "SCHEMA_NOT_FOUND",
        f"The schema `{database}` cannot be found.",
        help="check the database name, or create it first (CREATE DATABASE).",
    )
