"""Errors of reading the log: missing, corrupt or truncated tables, versions and timestamps
out of range, unsupported features."""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import (
    InternalError,
    InvalidArgumentError,
    InvalidTableError,
    TableNotFoundError,
    TimestampOutOfRangeError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

# --------------------------------------------------------------------------------------------
# Factories. Keep messages in one place so tests and the CLI can rely on them.
# --------------------------------------------------------------------------------------------


def table_not_found(table: str, reason: str = "") -> TableNotFoundError:
    detail = f" ({reason})" if reason else ""
    return TableNotFoundError(
        "DELTA_MISSING_DELTA_TABLE",
        f"is not a Delta table{detail}.",
        table=table,
        help="check the path; a Delta table has a non-empty _delta_log directory.",
    )


def versions_not_contiguous(
    table: str, versions: list[int], version_to_load: int
) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_VERSIONS_NOT_CONTIGUOUS",
        f"Versions ({', '.join(map(str, versions))}) are not contiguous. A gap in the delta log "
        f"between versions {versions[0]} and {versions[-1]} was detected while trying to load "
        f"version {version_to_load}.",
        table=table,
        help="the log is missing commit files; restore them from a backup.",
    )


def truncated_log(
    table: str, version_to_load: int, checkpoint_version: int, first_commit: int
) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_TRUNCATED_TRANSACTION_LOG",
        f"Unable to reconstruct state at version {version_to_load} as the transaction log has "
        f"been truncated: the newest usable checkpoint is at version {checkpoint_version} but the "
        f"first commit after it is version {first_commit}.",
        table=table,
        help="read a later version, or restore the missing commits or checkpoint.",
    )


def missing_checkpoint_parts(table: str, version: int) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_MISSING_PART_FILES",
        f"Couldn't find all part files of the checkpoint version: {version}, and the commits "
        "needed to replay without it are gone.",
        table=table,
        help="restore the missing checkpoint parts.",
    )


def corrupt_commit(table: str, file: str, line: int, reason: str) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_CORRUPT_COMMIT",
        f"Commit file {file} line {line} is not a valid action: {reason}.",
        table=table,
        help="the commit may be truncated or hand-edited; restore it from a backup.",
    )


def corrupt_checkpoint(table: str, file: str, reason: str) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_CORRUPT_CHECKPOINT",
        f"Checkpoint file {file} cannot be read: {reason}.",
        table=table,
        help="delete the damaged checkpoint (and _last_checkpoint) to replay commits.",
    )


def state_recover_error(table: str, what: str, version: int) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_STATE_RECOVER_ERROR",
        f"The {what} of your Delta table could not be recovered while reconstructing version "
        f"{version}: no {what} action was found in the log.",
        table=table,
        help="the log is corrupt; restore commit 0 or the checkpoint.",
    )


def version_not_found(table: str, version: int, earliest: int, latest: int) -> VersionNotFoundError:
    return VersionNotFoundError(
        "DELTA_VERSION_NOT_FOUND",
        f"Cannot time travel Delta table to version {version}. Available versions: "
        f"[{earliest}, {latest}].",
        table=table,
    )


def timestamp_earlier_than_retention(
    table: str, timestamp_ms: int, earliest_ms: int, earliest_version: int
) -> TimestampOutOfRangeError:
    return TimestampOutOfRangeError(
        "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION",
        f"The provided timestamp ({_fmt_ts(timestamp_ms)}) is before the earliest version "
        f"available to this table ({_fmt_ts(earliest_ms)}, version {earliest_version}).",
        table=table,
        help="use a timestamp at or after the earliest commit.",
    )


def timestamp_greater_than_latest(
    table: str, timestamp_ms: int, latest_ms: int, latest_version: int
) -> TimestampOutOfRangeError:
    return TimestampOutOfRangeError(
        "DELTA_TIMESTAMP_GREATER_THAN_COMMIT",
        f"The provided timestamp ({_fmt_ts(timestamp_ms)}) is after the latest version available "
        f"to this table ({_fmt_ts(latest_ms)}, version {latest_version}).",
        table=table,
        help="use a timestamp at or before the latest commit.",
    )


def no_recreatable_history(table: str) -> VersionNotFoundError:
    return VersionNotFoundError(
        "DELTA_NO_RECREATABLE_HISTORY_FOUND",
        "No recreatable commits found: commit 0 is gone and no complete checkpoint can start a "
        "replay.",
        table=table,
    )


def unsupported_reader_version(table: str, version: int) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_INVALID_PROTOCOL_VERSION",
        f"Unsupported Delta protocol version: the table requires reader version {version}, "
        "deltalog supports reader versions 1, 2 and 3.",
        table=table,
        help="upgrade deltalog, or read the table with a newer Delta client.",
    )


def unsupported_reader_features(table: str, features: Iterable[str]) -> UnsupportedFeatureError:
    names = sorted(features)
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
        f"Unable to read this table because it requires reader table feature(s) that deltalog "
        f"does not support: {', '.join(names)}.",
        table=table,
        help="upgrade deltalog, or read the table with a client that supports them.",
        features=names,
    )


def invalid_argument(message: str, table: str | None = None) -> InvalidArgumentError:
    return InvalidArgumentError("DELTA_INVALID_ARGUMENT", message, table=table)


def _fmt_ts(ms: int) -> str:
    import datetime as _dt

    return (
        _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        + " UTC"
    )


def checkpoint_snapshot_mismatch(
    table: str, version: int, written: int, expected: int
) -> InternalError:
    return InternalError(
        "DELTA_CHECKPOINT_SNAPSHOT_MISMATCH",
        f"State of the checkpoint doesn't match that of the snapshot: the checkpoint of version "
        f"{version} would hold {written} files (or rows) where the snapshot has {expected}; "
        "nothing was written.",
        table=table,
        help="this is a bug, please report it; the table itself is unchanged.",
    )


def failed_integrity_check(table: str, version: int, mismatches: list[str]) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_TXN_LOG_FAILED_INTEGRITY",
        f"The transaction log has failed integrity checks: the version checksum "
        f"{version:020d}.crc disagrees with the state replayed from the log at version {version} "
        f"({'; '.join(mismatches)}).",
        table=table,
        help="a log file was changed or removed outside Delta, or the writer of the .crc file "
        "had a bug; compare the commits with a backup. If the commits are right, delete that "
        ".crc file (and the later ones): they are optional and the next commit writes a new one.",
    )
