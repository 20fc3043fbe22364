"""Errors of RESTORE, with the reference's error classes and messages (imported from here,
not re-exported by ``deltalog.errors``, like :mod:`deltalog.errors.vacuum`)."""

from __future__ import annotations

from collections.abc import Sequence

from deltalog.errors import DeltaWriteError, InvalidArgumentError


def restore_missing_files(table: str, version: int, missing: Sequence[str]) -> DeltaWriteError:
    shown = ",".join(missing[:100])
    return DeltaWriteError(
        "DELTA_RESTORE_MISSED_DATA_FILES",
        f"Not all files from version {version} are available in file system. Missed files "
        f"(top 100 files): {shown}. They were probably removed by VACUUM or by hand. Nothing "
        "was committed.",
        table=table,
        help="restore a more recent version or timestamp, or pass ignore_missing_files=True "
        "(spark.sql.files.ignoreMissingFiles=true in Spark) to restore without them.",
    )


def restore_version_not_exist(
    table: str, version: int, earliest: int, latest: int
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CANNOT_RESTORE_TABLE_VERSION",
        f"Cannot restore table to version {version}. Available versions: [{earliest}, {latest}].",
        table=table,
    )


def restore_not_before_latest(table: str, version: int, latest: int) -> InvalidArgumentError:
    # The reference fails a ``require`` here (IllegalArgumentException, no error class).
    return InvalidArgumentError(
        "DELTA_RESTORE_VERSION_NOT_BEFORE_LATEST",
        f"Version to restore ({version}) should be less than the last available version "
        f"({latest}).",
        table=table,
    )


def restore_timestamp_greater(table: str, requested: str, latest: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER",
        f"Cannot restore table to timestamp ({requested}) as it is after the latest version "
        f"available. Please use a timestamp before ({latest}).",
        table=table,
    )


def restore_timestamp_earlier(table: str, requested: str, earliest: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CANNOT_RESTORE_TIMESTAMP_EARLIER",
        f"Cannot restore table to timestamp ({requested}) as it is before the earliest version "
        f"available. Please use a timestamp after ({earliest}).",
        table=table,
    )


def restore_version_and_timestamp(table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_RESTORE_VERSION_OR_TIMESTAMP",
        "Either the version or timestamp should be provided for restore, not both.",
        table=table,
    )
