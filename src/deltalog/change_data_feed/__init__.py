"""The change data feed, engine-free part (reference ``CDCReaderImpl``): which options ask for
it and which versions a read covers (:mod:`~deltalog.change_data_feed.versions`); what each
commit in the range contributes, as an O(files) plan of file reads, and the rows of a plan
row, its deletion vectors read where the rows are read (:mod:`~deltalog.change_data_feed.plan`).

On Spark, :mod:`deltalog.spark.read.changes` reads a plan with Spark's parquet reader and the
Python data source (:mod:`deltalog.spark.read.source_tasks`) reads it plan row by plan row.
"""

from deltalog.change_data_feed.plan import (
    ALL_ROWS,
    EXCEPT_ROWS,
    ONLY_ROWS,
    PLAN_SCHEMA,
    VECTOR_TYPE,
    ChangePlan,
    plan_changes,
    plan_commit_changes,
    read_change_file,
    selected_rows,
    selection_bound,
    vector_rows,
)
from deltalog.change_data_feed.rows import read_plan
from deltalog.change_data_feed.versions import (
    CDC_COLUMNS,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DELETE,
    INSERT,
    UPDATE_POSTIMAGE,
    UPDATE_PREIMAGE,
    CdfBounds,
    CdfRange,
    cdc_read_schema,
    is_cdc_enabled,
    is_cdc_read,
    resolve_range,
)

__all__ = [
    "ALL_ROWS",
    "CDC_COLUMNS",
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "DELETE",
    "EXCEPT_ROWS",
    "INSERT",
    "ONLY_ROWS",
    "PLAN_SCHEMA",
    "UPDATE_POSTIMAGE",
    "UPDATE_PREIMAGE",
    "VECTOR_TYPE",
    "CdfBounds",
    "CdfRange",
    "ChangePlan",
    "cdc_read_schema",
    "is_cdc_enabled",
    "is_cdc_read",
    "plan_changes",
    "plan_commit_changes",
    "read_change_file",
    "read_plan",
    "resolve_range",
    "selected_rows",
    "selection_bound",
    "vector_rows",
]
