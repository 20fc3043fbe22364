"""Which files VACUUM may delete (reference ``VacuumCommand``'s listing and valid-file sets),
as Arrow columns of absolute local paths.

* :func:`protected_paths`: live files, tombstones newer than the threshold, and the on-disk
  deletion vectors either references. Everything else under the table root is fair game.
* :func:`list_table_files` (FULL): every file under the root, skipping hidden names at any
  depth (``_`` or ``.`` first, except ``_change_data``, ``_delta_index*`` and
  ``<partitionColumn>=`` directories; ``metadata`` too on UniForm Iceberg tables), so
  ``_delta_log`` is never listed.
* :func:`select_deletable`: candidates older than the threshold that nothing protects.

Paths in the log are relative URIs (percent-encoded) or absolute ``file:`` URIs; listings give
decoded local paths. Both sides are turned into decoded absolute paths before comparing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from deltalog.actions import DeletionVectorDescriptor
from deltalog.deletion_vectors import dv_file_path
from deltalog.log.snapshot import Snapshot
from deltalog.paths import resolve
from deltalog.storage.base import FileInfo, LogStore

CANDIDATE_SCHEMA = pa.schema(
    [("path", pa.string()), ("size", pa.int64()), ("modificationTime", pa.int64())]
)
_UNHIDDEN_PREFIXES = ("_change_data", "_delta_index")


@dataclass(frozen=True, slots=True)
class Listing:
    """A FULL listing: candidate files (``CANDIDATE_SCHEMA``) and the number of directories
    holding them, the table root included (the reference's ``numVacuumedDirectories``)."""

    files: pa.Table
    num_directories: int


# -- what must stay -------------------------------------------------------------------------------


def protected_paths(snapshot: Snapshot, threshold_ms: int) -> pa.Array:
    """Absolute paths VACUUM must keep: live ``add`` files, ``remove`` tombstones deleted at or
    after ``threshold_ms``, and the on-disk deletion vectors of both."""
    root = snapshot.table_root
    adds = snapshot.all_files_arrow().select(["path", "deletionVector"])
    tombstones = snapshot.tombstones_arrow()
    recent = pc.fill_null(pc.greater_equal(tombstones["deletionTimestamp"], threshold_ms), False)
    removes = tombstones.filter(recent).select(["path", "deletionVector"])
    parts = [
        absolute_paths(root, adds["path"]),
        absolute_paths(root, removes["path"]),
        deletion_vector_paths(root, adds["deletionVector"]),
        deletion_vector_paths(root, removes["deletionVector"]),
    ]
    return pa.chunked_array(parts, pa.string()).combine_chunks()


def absolute_paths(root: str, paths: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Decoded absolute local paths of log paths (relative to ``root`` or absolute URIs).

    Plain relative paths (the common case) are joined in Arrow; only paths with escapes or a
    scheme are decoded one by one."""
    paths = _as_array(paths)
    if len(paths) == 0:
        return pa.array([], pa.string())
    special = pc.or_(
        pc.match_substring(paths, "%"),
        pc.or_(pc.starts_with(paths, "/"), pc.starts_with(paths, "file:")),
    )
    joined = pc.binary_join_element_wise(root, paths, "/")
    if not pc.any(special).as_py():
        return joined
    flags = special.to_pylist()
    decoded = [
        resolve(root, p) if f else None for p, f in zip(paths.to_pylist(), flags, strict=True)
    ]
    return pc.if_else(special, pa.array(decoded, pa.string()), joined)


def deletion_vector_paths(root: str, dvs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Absolute paths of the on-disk (``u`` and ``p``) deletion vectors among ``dvs``; inline
    vectors have no file. (The reference protects only ``u`` vectors, relative to the table;
    an absolute ``p`` vector that happens to lie inside it is kept here too.)"""
    dvs = _as_array(dvs)
    if len(dvs) == 0 or dvs.null_count == len(dvs):
        return pa.array([], pa.string())
    kinds = pc.struct_field(dvs, "storageType")
    on_disk = dvs.filter(pc.fill_null(pc.is_in(kinds, pa.array(["u", "p"])), False))
    out = [dv_file_path(root, DeletionVectorDescriptor.from_dict(d)) for d in on_disk.to_pylist()]
    return pa.array(out, pa.string())


# -- what is there --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HiddenNames:
    """Which file and directory names VACUUM's listing skips (see the module docstring)."""

    partition_prefixes: tuple[str, ...]
    iceberg: bool

    def __call__(self, name: str) -> bool:
        if self.iceberg and name == "metadata":
            return True
        if not name.startswith(("_", ".")):
            return False
        return not name.startswith(_UNHIDDEN_PREFIXES + self.partition_prefixes)


def hidden_name_test(partition_columns: Iterable[str], iceberg: bool) -> HiddenNames:
    """The reference's ``DeltaTableUtils.isHiddenDirectory`` for this table."""
    return HiddenNames(tuple(f"{c}=" for c in partition_columns), iceberg)


def list_table_files(store: LogStore, root: str, hidden: HiddenNames) -> Listing:
    """Every file under ``root`` outside hidden names (at any depth), with size and mtime."""
    files = filter_listing(root, store.list_recursive(root), hidden)
    return Listing(files, count_directories(root, files["path"]))


def top_level(store: LogStore, root: str, hidden: HiddenNames) -> tuple[pa.Table, list[str]]:
    """The candidate files directly under ``root`` and the names of its directories that are
    not hidden, sorted: with :func:`list_under` on those directories, the same files as
    :func:`list_table_files`, split so the directories can be listed in parallel."""
    infos, directories = store.list_children(root)
    return filter_listing(root, infos, hidden), sorted(d for d in directories if not hidden(d))


def list_under(
    store: LogStore, root: str, directories: Iterable[str], hidden: HiddenNames
) -> pa.Table:
    """The candidate files below ``directories`` (names of directories directly under
    ``root``); runs wherever the listing runs (driver or Spark tasks)."""
    base = root.rstrip("/")
    parts = [filter_listing(root, store.list_recursive(f"{base}/{d}"), hidden) for d in directories]
    return pa.concat_tables([candidate_table(()), *parts])


def filter_listing(root: str, infos: Iterable[FileInfo], hidden: HiddenNames) -> pa.Table:
    """The listed files below ``root`` (never outside it) with no hidden name in their path
    relative to it, as ``CANDIDATE_SCHEMA`` rows."""
    paths: list[str] = []
    sizes: list[int] = []
    times: list[int] = []
    prefix = root.rstrip("/") + "/"
    for info in infos:
        if not info.path.startswith(prefix):
            continue  # never outside the root
        if any(hidden(p) for p in info.path[len(prefix) :].split("/")):
            continue
        paths.append(info.path)
        sizes.append(info.size)
        times.append(info.modification_time)
    return pa.table([paths, sizes, times], schema=CANDIDATE_SCHEMA)


def count_directories(root: str, paths: pa.Array | pa.ChunkedArray) -> int:
    """Directories holding ``paths`` (every ancestor below ``root``), plus the root itself:
    the reference's ``numVacuumedDirectories``."""
    prefix_len = len(root.rstrip("/")) + 1
    directories: set[str] = set()
    for path in _as_array(paths).to_pylist():
        parts = path[prefix_len:].split("/")
        for depth in range(1, len(parts)):
            directories.add("/".join(parts[:depth]))
    return len(directories) + 1


def candidate_table(rows: Iterable[tuple[str, int, int]]) -> pa.Table:
    """Candidates from ``(absolute path, size, modification time)`` rows."""
    paths, sizes, times = [], [], []
    for path, size, mtime in rows:
        paths.append(posixpath.normpath(path))
        sizes.append(size)
        times.append(mtime)
    return pa.table([paths, sizes, times], schema=CANDIDATE_SCHEMA)


# -- the difference -------------------------------------------------------------------------------


def select_deletable(candidates: pa.Table, protected: pa.Array, threshold_ms: int) -> pa.Table:
    """Candidates modified before ``threshold_ms`` and not protected, one row per path (the
    newest, as the reference keeps of duplicates), sorted by path."""
    old = candidates.filter(pc.less(candidates["modificationTime"], threshold_ms))
    keep = pc.invert(pc.is_in(old["path"], value_set=protected))
    unprotected = old.filter(keep)
    if unprotected.num_rows == 0:
        return unprotected
    newest = unprotected.group_by("path").aggregate([("size", "max"), ("modificationTime", "max")])
    out = pa.table(
        [newest["path"], newest["size_max"], newest["modificationTime_max"]],
        schema=CANDIDATE_SCHEMA,
    )
    return out.sort_by("path")


def _as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    return values
