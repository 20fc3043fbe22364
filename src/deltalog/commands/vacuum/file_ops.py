"""How VACUUM lists and deletes files: the seam between the pure core's VACUUM
(:mod:`deltalog.commands.vacuum.gc`) and an engine that spreads the work.

:class:`VacuumFileOps` has two verbs, the FULL listing and the deletes. :class:`DriverFileOps`,
the default, does both in this process (one recursive listing, deletes on a thread pool); the
Spark layer's implementation (:mod:`deltalog.spark.commands.vacuum_jobs`) lists the table's
top-level
directories and deletes in Spark tasks. Both must give the same listing for the same files:
they share :func:`~deltalog.commands.vacuum.files.filter_listing`, and the split listing
(:func:`~deltalog.commands.vacuum.files.top_level` plus
:func:`~deltalog.commands.vacuum.files.list_under`) covers exactly what the single one does.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from deltalog.commands.vacuum.files import HiddenNames, Listing, list_table_files
from deltalog.storage.base import LogStore

DEFAULT_DELETE_THREADS = 8


class VacuumFileOps(Protocol):
    """Lists a table's candidate files and deletes the chosen ones."""

    def list_files(self, store: LogStore, root: str, hidden: HiddenNames) -> Listing:
        """Every file below ``root`` with no ``hidden`` name in its relative path, and the
        number of directories holding them (the root included)."""
        ...

    def delete_files(self, store: LogStore, paths: Sequence[str]) -> int:
        """Delete ``paths`` (absolute, under the table root); how many existed and were
        deleted. Deleting a missing file is not an error (a previous run may have)."""
        ...


@dataclass(frozen=True, slots=True)
class DriverFileOps:
    """:class:`VacuumFileOps` in this process: one listing, deletes on ``threads`` threads."""

    threads: int = DEFAULT_DELETE_THREADS

    def list_files(self, store: LogStore, root: str, hidden: HiddenNames) -> Listing:
        return list_table_files(store, root, hidden)

    def delete_files(self, store: LogStore, paths: Sequence[str]) -> int:
        return delete_files(store, paths, self.threads)


def delete_files(store: LogStore, paths: Sequence[str], threads: int = 1) -> int:
    """Delete ``paths`` on ``threads`` threads; returns how many existed and were deleted."""

    def one(path: str) -> int:
        if not store.exists(path):
            return 0
        store.delete(path)
        return 1

    if threads <= 1 or len(paths) < 2:
        return sum(one(p) for p in paths)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vacuum-delete") as pool:
        return sum(pool.map(one, paths))
