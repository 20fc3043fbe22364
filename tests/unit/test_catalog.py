"""deltalog's table-name registry under a warehouse folder (pure, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltalog import errors
from deltalog.catalog import Catalog, TableEntry, local_path
from deltalog.spark.read.options import from_catalog


def test_catalog_names_survive_a_new_instance(tmp_path: Path) -> None:
    first = Catalog(f"file:{tmp_path}")
    managed = first.managed_location("Default", "Events")
    assert managed == str(tmp_path / "events")
    assert first.managed_location("sales", "t") == str(tmp_path / "sales.db" / "t")
    first.register(TableEntry("default", "Events", managed, managed=True))
    first.register(TableEntry("sales", "ext", "/elsewhere", managed=False))

    again = Catalog(str(tmp_path))  # another session on the same warehouse
    assert again.lookup("DEFAULT", "events") == TableEntry("default", "events", managed, True)
    assert [e.name for e in again.tables("sales")] == ["ext"]
    assert again.lookup("default", "missing") is None
    assert again.has_name("EXT") and not again.has_name("missing")
    with pytest.raises(errors.DeltaWriteError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        again.register(TableEntry("default", "events", "/x", managed=False))
    again.register(TableEntry("default", "events", "/x", managed=False), replace=True)
    assert first.lookup("default", "events") == TableEntry("default", "events", "/x", False)


def _managed_and_external(tmp_path: Path) -> tuple[Catalog, Path, Path]:
    """A registry with a managed table ``default.m`` and an external one ``default.e``."""
    catalog = Catalog(str(tmp_path / "wh"))
    managed = Path(catalog.managed_location("default", "m"))
    external = tmp_path / "ext"
    for folder in (managed, external):
        (folder / "_delta_log").mkdir(parents=True)
    catalog.register(TableEntry("default", "m", str(managed), managed=True))
    catalog.register(TableEntry("default", "e", str(external), managed=False))
    return catalog, managed, external


def test_drop_removes_managed_files_only(tmp_path: Path) -> None:
    catalog, managed, external = _managed_and_external(tmp_path)
    assert catalog.drop("default", "m") is not None and not managed.exists()
    assert catalog.drop("default", "e") is not None and external.exists()
    assert catalog.drop("default", "e") is None
    assert catalog.lookup("default", "m") is None


def test_bad_names_and_uris() -> None:
    with pytest.raises(errors.InvalidArgumentError):
        Catalog("/wh").lookup("default", "../x")
    assert local_path("file:///a/b") == "/a/b" and local_path("file:/a") == "/a"


def test_rename_moves_a_managed_folder_and_keeps_an_external_one(tmp_path: Path) -> None:
    catalog, managed, external = _managed_and_external(tmp_path)

    moved = catalog.rename(TableEntry("default", "m", str(managed), True), "sales", "M2")
    assert moved == TableEntry("sales", "m2", str(tmp_path / "wh" / "sales.db" / "m2"), True)
    assert (tmp_path / "wh" / "sales.db" / "m2" / "_delta_log").is_dir() and not managed.exists()
    assert catalog.lookup("default", "m") is None and catalog.lookup("sales", "m2") == moved
    with pytest.raises(errors.DeltaWriteError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        catalog.rename(TableEntry("default", "e", str(external), False), "sales", "m2")
    kept = catalog.rename(TableEntry("default", "e", str(external), False), "default", "e2")
    assert kept.location == str(external) and (external / "_delta_log").is_dir()


def test_a_catalogs_schema_question_is_told_from_a_load() -> None:
    # What Spark's session catalog passes the ``delta`` source when it creates a table with no
    # columns: the table's reserved properties (PySpark 4.3, seen in a Hive session).
    asked = {"provider": "delta", "location": "file:/wh/ext", "owner": "root"}
    assert from_catalog(asked) and from_catalog({"PROVIDER": "delta"})
    assert not from_catalog({"path": "/t", "versionAsOf": "1"})
