"""Errors of row tracking (PROTOCOL.md "Row Tracking"): ids that cannot be assigned or kept."""

from __future__ import annotations

from deltalog.errors import DeltaWriteError, InternalError, UnsupportedFeatureError


def row_id_assignment_without_stats(table: str, path: str) -> DeltaWriteError:
    """An ``add`` without ``numRecords``: fresh row ids cannot be assigned (reference
    ``DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS``)."""
    return DeltaWriteError(
        "DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS",
        f"Cannot assign row ids to {path}: its statistics have no numRecords, and the table "
        "tracks row ids (table feature rowTracking).",
        table=table,
        help="write the file with statistics (e.g. CONVERT with statistics, or leave "
        "delta.dataSkippingNumIndexedCols alone), or drop the rowTracking feature first.",
    )


def row_tracking_not_preserved(table: str, operation: str) -> UnsupportedFeatureError:
    """A command would rewrite rows of a table with row tracking enabled without carrying
    their row ids and commit versions over."""
    return UnsupportedFeatureError(
        "DELTA_ROW_TRACKING_NOT_PRESERVED",
        f"{operation} would rewrite rows of this table, which has row tracking enabled "
        "(delta.enableRowTracking), on a path that does not carry their row ids and row commit "
        "versions over; nothing was committed.",
        table=table,
        help="run the command where Spark's parquet reader can read the table (row ids come "
        "from its row_index), or set delta.enableRowTracking=false first if the ids need not "
        "be kept.",
        features=("rowTracking",),
    )


def high_water_mark_set_by_caller(table: str) -> InternalError:
    """The reference's guard: only the commit path writes the ``delta.rowTracking`` domain."""
    return InternalError(
        "DELTA_ROW_TRACKING_HIGH_WATER_MARK_SET",
        "Manually setting the row id high-water mark (domain delta.rowTracking) is not allowed; "
        "the commit assigns it.",
        table=table,
    )


def illegal_property_combination(table: str) -> DeltaWriteError:
    """``delta.enableRowTracking`` and ``delta.rowTrackingSuspended`` both true."""
    return DeltaWriteError(
        "DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION",
        "delta.enableRowTracking and delta.rowTrackingSuspended are both true; a table cannot "
        "keep row ids while their assignment is suspended.",
        table=table,
        help="set one of the two properties to false.",
    )


def enable_needs_backfill(table: str, files: int) -> UnsupportedFeatureError:
    """Enabling row tracking on a table whose files have no row ids yet."""
    return UnsupportedFeatureError(
        "DELTA_ROW_TRACKING_BACKFILL_REQUIRED",
        f"delta.enableRowTracking=true needs every file to have row ids; {files} file(s) have "
        "none.",
        table=table,
        help="enable it with deltalog's ALTER TABLE ... SET TBLPROPERTIES "
        "('delta.enableRowTracking'='true') (which backfills the ids first), or "
        "deltalog.enable_row_tracking(path).",
        features=("rowTracking",),
    )
