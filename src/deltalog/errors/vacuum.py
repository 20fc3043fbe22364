"""Errors of VACUUM, with the reference's error classes and messages.

Kept out of ``errors/__init__``'s re-exports so that maintenance commands developed side by
side do not edit one import list; import them from here.
"""

from __future__ import annotations

from deltalog.errors import DeltaWriteError, InvalidArgumentError

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"


def vacuum_retention_negative(table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE",
        "Retention period for Vacuum can't be less than 0 hours.",
        table=table,
    )


def vacuum_retention_too_short(table: str, configured_hours: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT",
        "The specified VACUUM retention period is too low and may corrupt this Delta table if "
        "any writes are in progress. If no operations (insert, upsert, delete, optimize) are "
        f"running, you can disable this safety check by setting {RETENTION_CHECK_CONF} = false "
        "(enforce_retention_duration=False from plain Python). Otherwise, use a retention "
        f"period of at least {configured_hours} hours.",
        table=table,
    )


def cannot_vacuum_lite(table: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_CANNOT_VACUUM_LITE",
        "VACUUM LITE cannot delete all eligible files as some files are not referenced by the "
        "Delta log. Please run VACUUM FULL.",
        table=table,
        help="run vacuum without lite=True once; later LITE runs continue from it.",
    )
