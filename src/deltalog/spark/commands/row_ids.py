"""Row ids through Spark's rewrites (PROTOCOL.md "Row Tracking"): the rows a command rewrites
carry their ids and commit versions into the new files' materialized columns
(:func:`deltalog.spark.read.row_tracking.tracked_scan` reads them; the write plan here writes
them), updated rows with a null commit version, so the commit's version becomes theirs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from deltalog import row_tracking
from deltalog.commands.write.write_into_delta import WritePlan

if TYPE_CHECKING:
    from deltalog.txn.transaction import Transaction


def carrying(
    txn: Transaction, plan: WritePlan, tracking: row_tracking.MaterializedColumns | None
) -> WritePlan:
    """``plan`` writing the rows' ids and commit versions too (row tracking enabled): the
    commit then says it kept them."""
    if tracking is None:
        return plan
    txn.row_tracking_preserved = True
    return replace(plan, layout=replace(plan.layout, carried_columns=tracking.names))


def without_row_ids(df: Any, tracking: row_tracking.MaterializedColumns | None) -> Any:
    """``df`` without the row-tracking columns (change data keeps no row ids)."""
    return df if tracking is None else df.drop(*tracking.names)


def updated_row_ids(
    df: Any, tracking: row_tracking.MaterializedColumns | None, hit: Any
) -> list[Any]:
    """The row-tracking columns of rewritten rows: their ids, and a null commit version where
    ``hit`` holds (an updated row: the commit's own version)."""
    if tracking is None:
        return []
    version = tracking.row_commit_version
    null = F.lit(None).cast("long")
    return [
        df[f"`{tracking.row_id}`"],
        F.when(hit, null).otherwise(df[f"`{version}`"]).alias(version),
    ]
