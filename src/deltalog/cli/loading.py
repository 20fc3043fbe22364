"""Opening a table for the CLI: the snapshot a command asks for, and the truth about a broken log.

* When the newest commits cannot be read, ``--version N`` reads the log as it was at version
  ``N`` (a view hiding later files), so a zero-byte or corrupt newer commit never stops an
  older version from being read.
* A zero-byte commit file (a writer died before writing it) is reported as
  ``DELTA_EMPTY_COMMIT_FILE`` naming the file and its version, never read as an empty commit.
* A commit that does not parse is reported with its version and the newest readable version.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, BinaryIO

from deltalog import errors
from deltalog.delta_log import DeltaLog, Engine
from deltalog.log.filenames import LAST_CHECKPOINT, LOG_DIR, LogFile, LogFileKind, parse_log_file
from deltalog.log.snapshot import Snapshot
from deltalog.paths import normalize_table_root
from deltalog.storage import FileInfo, LogStore, store_for

BROKEN_COMMIT = ("DELTA_EMPTY_COMMIT_FILE", "DELTA_CORRUPT_COMMIT")
_COMMIT_FILE = re.compile(r"(\d{20})\.json\b")  # a commit file's name (PROTOCOL.md)


def open_log(
    table: str, *, version: int | None = None, engine: Engine = "driver", spark: Any = None
) -> DeltaLog:
    """The log of ``table``, its latest version loaded; when a commit of that version is empty
    or corrupt and ``version`` is given, the log as it was at ``version`` instead.

    Raises:
        InvalidTableError: ``DELTA_EMPTY_COMMIT_FILE`` or ``DELTA_CORRUPT_COMMIT`` naming the
            commit file and its version, when the version needed cannot be read.
        DeltaError: whatever else opening the log raises.
    """
    try:
        return _open(table, None, engine, spark)
    except errors.InvalidTableError as e:
        if version is None or e.error_class not in BROKEN_COMMIT:
            raise
    return _open(table, version, engine, spark)


def load_snapshot(
    table: str,
    *,
    version: int | None = None,
    timestamp_ms: int | None = None,
    engine: Engine = "driver",
    spark: Any = None,
) -> Snapshot:
    """The snapshot of ``version``, of the version current at ``timestamp_ms``, or the latest.

    Raises:
        InvalidTableError: a commit the snapshot replays is empty or corrupt (see
            :func:`open_log`; a broken newer commit does not stop ``version``).
        VersionNotFoundError, TimestampOutOfRangeError, TableNotFoundError: as the log says.
    """
    log = open_log(table, version=version, engine=engine, spark=spark)
    with explain_broken_commits(table, log.store, version):
        if version is not None:
            snapshot = log.get_snapshot_at(version)
        elif timestamp_ms is not None:
            snapshot = log.get_snapshot_at_timestamp(timestamp_ms)
        else:
            snapshot = log.snapshot
        check_commit_files(snapshot)
    return snapshot


def _open(table: str, up_to: int | None, engine: Engine, spark: Any) -> DeltaLog:
    """The log of ``table`` seen as of version ``up_to`` (all of it for ``None``), its latest
    snapshot checked for empty commit files."""
    store = store_for(table)
    view = store if up_to is None else LogUpTo(store, up_to)
    with explain_broken_commits(table, view, up_to):
        log = DeltaLog(table, store=view, spark=spark, engine=engine)
        if log.table_exists():
            check_commit_files(log.snapshot)
    return log


def check_commit_files(snapshot: Snapshot) -> None:
    """Raise ``DELTA_EMPTY_COMMIT_FILE`` when a commit file ``snapshot`` replays is zero bytes."""
    for commit in snapshot.segment.commits:
        if commit.file.size == 0:
            raise empty_commit(snapshot.table_root, commit.path, commit.version)


def empty_commit(table: str, path: str, version: int) -> errors.InvalidTableError:
    """A zero-byte commit file: what a writer without atomic put-if-absent leaves when it dies."""
    return errors.InvalidTableError(
        "DELTA_EMPTY_COMMIT_FILE",
        f"Commit file {path} (version {version}) is empty: a writer crashed or its storage lost "
        "the content.",
        table=table,
        help=_older_versions(version)
        + "; if that version was never committed, delete the empty file.",
    )


@contextmanager
def explain_broken_commits(table: str, store: LogStore, up_to: int | None) -> Iterator[None]:
    """Re-raise a log error caused by a zero-byte commit as ``DELTA_EMPTY_COMMIT_FILE``, and a
    ``DELTA_CORRUPT_COMMIT`` with its version and the newest version still readable."""
    try:
        yield
    except errors.InvalidTableError as e:
        if e.error_class == "DELTA_CORRUPT_COMMIT":
            raise _with_version(e) from None
        if e.error_class in BROKEN_COMMIT:
            raise
        empty = _first_empty_commit(table, store, up_to)
        if empty is None:
            raise
        raise empty_commit(normalize_table_root(table), empty.path, empty.version) from e


def _with_version(e: errors.InvalidTableError) -> errors.InvalidTableError:
    """``e`` (``DELTA_CORRUPT_COMMIT``, naming the commit file) with the version spelled out
    and how to read the versions before it."""
    found = _COMMIT_FILE.search(str(e))
    if found is None or _bare_message(e).startswith("version "):
        return e  # no file named, or already explained
    version = int(found.group(1))
    return errors.InvalidTableError(
        e.error_class,
        f"version {version} cannot be read: {_bare_message(e)}",
        table=e.table,
        help=f"{_older_versions(version)}; restore the commit from a backup if it was hand-edited "
        "or truncated.",
    )


def _bare_message(e: errors.DeltaError) -> str:
    """The message of ``e`` without the class, table and help that ``DeltaError`` adds."""
    text = str(e).removeprefix(f"[{e.error_class}] ")
    if e.table:
        text = text.removeprefix(f"Table {e.table}: ")
    if e.help:
        text = text.removesuffix(f" Help: {e.help}")
    return text


def _older_versions(version: int) -> str:
    if version == 0:
        return "no earlier version exists"
    older = version - 1
    which = "version 0 is" if older == 0 else f"versions up to {older} are"
    return f"{which} readable (--version {older}; changes: --to {older})"


def _first_empty_commit(table: str, store: LogStore, up_to: int | None) -> LogFile | None:
    """The oldest zero-byte commit file at or below ``up_to``, if any."""
    try:
        listing = store.list_from(f"{normalize_table_root(table)}/{LOG_DIR}", "0")
    except (FileNotFoundError, NotADirectoryError):
        return None
    for f in listing:
        lf = parse_log_file(f)
        if lf is None or lf.kind is not LogFileKind.COMMIT or f.size != 0:
            continue
        if up_to is None or lf.version <= up_to:
            return lf
    return None


class LogUpTo:
    """A read-only :class:`~deltalog.storage.LogStore` view of a table as of ``version``: log
    files of later versions and the ``_last_checkpoint`` hint (which may name a later
    checkpoint) are hidden; everything else reads through."""

    def __init__(self, store: LogStore, version: int) -> None:
        self._store = store
        self._version = version

    def _visible(self, f: FileInfo) -> bool:
        lf = parse_log_file(f)
        if lf is None:
            return True
        return max(lf.version, lf.end_version or lf.version) <= self._version

    def list_from(self, directory: str, start_name: str) -> list[FileInfo]:
        return [f for f in self._store.list_from(directory, start_name) if self._visible(f)]

    def list_recursive(self, directory: str) -> Iterator[FileInfo]:
        return self._store.list_recursive(directory)

    def list_children(self, directory: str) -> tuple[list[FileInfo], list[str]]:
        return self._store.list_children(directory)

    def read(self, path: str) -> bytes:
        if path.endswith(f"/{LOG_DIR}/{LAST_CHECKPOINT}"):
            raise FileNotFoundError(path)
        return self._store.read(path)

    def stat(self, path: str) -> FileInfo:
        return self._store.stat(path)

    def exists(self, path: str) -> bool:
        return self._store.exists(path)

    def write_if_absent(self, path: str, data: bytes) -> None:
        raise PermissionError(f"read-only view of the log: {path}")

    def overwrite(self, path: str, data: bytes, *, durable: bool = True) -> None:
        raise PermissionError(f"read-only view of the log: {path}")

    def open_output(self, path: str) -> AbstractContextManager[BinaryIO]:
        raise PermissionError(f"read-only view of the log: {path}")

    def rename(self, source: str, target: str) -> None:
        raise PermissionError(f"read-only view of the log: {target}")

    def delete_directory(self, directory: str) -> None:
        raise PermissionError(f"read-only view of the log: {directory}")

    def delete(self, path: str) -> None:
        raise PermissionError(f"read-only view of the log: {path}")
