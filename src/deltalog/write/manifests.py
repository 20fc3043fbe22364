"""Symlink-format manifests for Presto/Athena/Hive (reference ``hooks/GenerateSymlinkManifest``):
written by the post-commit hook (:mod:`deltalog.txn.hooks`) and by ``GENERATE``
(:mod:`deltalog.commands.manifest`). Pure core.

* ``_symlink_format_manifest/<partition directories>/manifest`` (``_symlink_format_manifest/
  manifest`` when unpartitioned) lists the absolute ``file:`` URI of every live data file of that
  partition, one a line. Partition directories are Hive-escaped ``col=value`` segments in
  partition-column order, ``__HIVE_DEFAULT_PARTITION__`` for null.
* Manifests of partitions with no live file left are deleted, so a reader never sees stale ones.
* Refused on tables whose files carry deletion vectors (readers of manifests would see deleted
  rows) and on column-mapped tables (their physical names mean nothing to such readers).
* :func:`generate_after_commit` is the post-commit hook for tables with
  ``delta.compatibility.symlinkFormatManifest.enabled=true``; unlike the reference's incremental
  hook it rewrites every partition's manifest (same result, more writes on wide tables).
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from typing import TYPE_CHECKING
from urllib.parse import quote

import pyarrow.compute as pc

from deltalog.errors import manage as manage_errors
from deltalog.paths import resolve
from deltalog.write.partitioning import partition_directory

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST_NAME = "manifest"
SYMLINK_MODE = "symlink_format_manifest"
ENABLED_PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"


def generate_after_commit(store: LogStore, snapshot: Snapshot) -> None:
    """The post-commit hook: regenerate the manifests when the table asks for them."""
    if snapshot.metadata.configuration.get(ENABLED_PROPERTY, "false").lower() == "true":
        write_manifests(store, snapshot)


def write_manifests(store: LogStore, snapshot: Snapshot) -> int:
    """Write every partition's manifest for ``snapshot`` and delete stale ones."""
    root = snapshot.table_root
    if snapshot.column_mapping_mode != "none":
        raise manage_errors.manifest_with_column_mapping(root)
    files = snapshot.all_files_arrow()
    if files.num_rows and pc.any(pc.is_valid(files["deletionVector"])).as_py():
        raise manage_errors.generate_with_deletion_vectors(root)
    by_dir = manifest_contents(snapshot)
    base = f"{root}/{MANIFEST_DIR}"
    for directory, lines in by_dir.items():
        target = (
            posixpath.join(base, directory, MANIFEST_NAME)
            if directory
            else (f"{base}/{MANIFEST_NAME}")
        )
        store.overwrite(target, ("\n".join(sorted(lines)) + "\n").encode("utf-8"))
    wanted = {
        posixpath.join(base, d, MANIFEST_NAME) if d else f"{base}/{MANIFEST_NAME}" for d in by_dir
    }
    for info in list(store.list_recursive(base)):
        if info.name == MANIFEST_NAME and info.path not in wanted:
            store.delete(info.path)
    return len(by_dir)


def manifest_contents(snapshot: Snapshot) -> dict[str, list[str]]:
    """Partition directory (``""`` when unpartitioned) -> absolute file URIs of its live files."""
    root = snapshot.table_root
    columns = snapshot.partition_columns
    out: dict[str, list[str]] = defaultdict(list)
    files = snapshot.all_files_arrow().select(["path", "partitionValues"]).to_pylist()
    for row in files:
        values = dict(row["partitionValues"] or {})
        directory = partition_directory([(c, values.get(c)) for c in columns]) if columns else ""
        out[directory].append("file:" + quote(resolve(root, row["path"]), safe="/"))
    return dict(out)
