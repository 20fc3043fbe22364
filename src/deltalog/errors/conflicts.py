"""Errors of concurrent modification, with the reference's messages."""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)

# --------------------------------------------------------------------------------------------
# Concurrent modification (deltalog.txn.conflicts). ``table_name`` names the table as the
# reference does in these messages (``delta.`<path>``` or the metadata name); ``operation`` and
# ``version`` are the winning commit's; ``commit_info`` is its commitInfo as JSON.
# --------------------------------------------------------------------------------------------

CONCURRENCY_HELP = (
    "refresh the table and retry the operation; see "
    "https://docs.delta.io/latest/concurrency-control.html."
)


def _winner(operation: str, version: int, article: str = "a") -> str:
    return f"{article} concurrent {operation} committed at version {version}"


def _file_list(paths: Iterable[str], limit: int = 5) -> str:
    names = list(paths)
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


def _conflicting(commit_info: str | None) -> str:
    return f" Conflicting commit: {commit_info}" if commit_info else ""


def concurrent_append(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    read_version: int,
    partition: str | None,
) -> ConcurrentAppendException:
    where = f"partition {partition} of {table_name}" if partition else table_name
    return ConcurrentAppendException(
        "DELTA_CONCURRENT_APPEND",
        f"Files were added to {where} by {_winner(operation, version)}, after this "
        f"transaction read version {read_version}; its reads should have included them.",
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def concurrent_delete_read(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    files: Iterable[str],
    partition: str | None,
    *,
    whole_table: bool = False,
) -> ConcurrentDeleteReadException:
    where = f"partition {partition} of {table_name}" if partition else table_name
    what = (
        f"while this transaction read the whole table: {_file_list(files)}"
        if whole_table
        else f"that this transaction read: {_file_list(files)}"
    )
    return ConcurrentDeleteReadException(
        "DELTA_CONCURRENT_DELETE_READ",
        f"{_winner(operation, version, 'A')} removed files of {where} {what}.",
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def concurrent_delete_delete(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    files: Iterable[str],
    partition: str | None,
) -> ConcurrentDeleteDeleteException:
    where = f"partition {partition} of {table_name}" if partition else table_name
    return ConcurrentDeleteDeleteException(
        "DELTA_CONCURRENT_DELETE_DELETE",
        f"{_winner(operation, version, 'A')} removed files of {where} that this "
        f"transaction also removes: {_file_list(files)}.",
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def concurrent_app_transaction(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    app_ids: Iterable[str],
    commit_info: str | None,
) -> ConcurrentTransactionException:
    ids = ", ".join(repr(a) for a in sorted(app_ids))
    return ConcurrentTransactionException(
        "DELTA_CONCURRENT_TRANSACTION",
        f"{_winner(operation, version, 'A')} recorded a new version of {table_name} for "
        f"application id {ids}, which this transaction read: two writers use one application "
        "id, typically two streaming queries sharing one checkpoint." + _conflicting(commit_info),
        table=table,
        help="run one writer per application id (checkpoint location), then " + CONCURRENCY_HELP,
        version=version,
    )


def concurrent_domain_metadata(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    domain: str,
    commit_info: str | None,
) -> ConcurrentTransactionException:
    return ConcurrentTransactionException(
        "DELTA_CONCURRENT_TRANSACTION",
        f"{_winner(operation, version, 'A')} changed metadata domain {domain!r} of "
        f"{table_name}, which this transaction also changes." + _conflicting(commit_info),
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def metadata_changed(
    table: str, table_name: str, operation: str, version: int, commit_info: str | None
) -> MetadataChangedException:
    return MetadataChangedException(
        "DELTA_METADATA_CHANGED",
        f"The metadata of {table_name} (schema, partitioning or properties) was changed by "
        f"{_winner(operation, version)}." + _conflicting(commit_info),
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def protocol_changed(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    reason: str,
    commit_info: str | None,
) -> ProtocolChangedException:
    extra = (
        " This happens when several writers create the table in an empty directory at once; "
        "create the table before writing to it concurrently."
        if version == 0
        else ""
    )
    return ProtocolChangedException(
        "DELTA_PROTOCOL_CHANGED",
        f"The protocol of {table_name} was changed by {_winner(operation, version)}{reason}."
        + extra
        + _conflicting(commit_info),
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def row_tracking_backfill_running_concurrently_with_unbackfill(
    table: str, version: int
) -> DeltaConcurrentModificationException:
    """An unbackfill (dropping ``rowTracking``) lost its version to a backfill (enabling it)."""
    return DeltaConcurrentModificationException(
        "DELTA_ROW_TRACKING_BACKFILL_RUNNING_CONCURRENTLY_WITH_UNBACKFILL",
        "A Row Tracking enablement (ROW TRACKING BACKFILL at version "
        f"{version}) ran concurrently with a Row Tracking disablement (ROW TRACKING UNBACKFILL); "
        "the disablement was aborted.",
        table=table,
        help="retry the disablement (DROP FEATURE rowTracking) once the enablement is complete.",
        version=version,
    )
