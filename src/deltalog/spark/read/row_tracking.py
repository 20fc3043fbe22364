"""Row ids and row commit versions in a Spark read of a table with row tracking
(PROTOCOL.md "Row Tracking"): ``spark.read.format("delta").option("rowTracking", "true")``.

delta-spark exposes them as ``_metadata.row_id`` and ``_metadata.row_commit_version``: its
``DeltaParquetFileFormat`` overrides ``FileFormat.metadataSchemaFields`` (Scala) so that the file
source's hidden ``_metadata`` struct gets those fields, computed in the reader. Without a JVM
class there is no way to add fields to that struct: Spark's parquet source has a fixed set
(``file_path``, ``file_name``, ``file_size``, ``file_block_start``, ``file_block_length``,
``file_modification_time``, ``row_index``), and neither PySpark's DataFrame API nor its Python
data sources can declare metadata columns. The closest thing deltalog can give, and gives here,
is a visible struct column named ``_metadata`` holding ``row_id``, ``row_commit_version``,
``base_row_id`` and ``default_row_commit_version``: ``df.select("_metadata.row_id")`` then reads
as in delta-spark, but the column is part of ``df.columns`` (and of ``SELECT *``).

Each value is computed by the protocol's rule from Spark's ``_metadata.row_index`` and the
file's ``baseRowId`` / ``defaultRowCommitVersion`` (joined by file), and the file's
materialized columns where a rewrite wrote them:
``row_id = coalesce(materialized row id, baseRowId + row_index)``,
``row_commit_version = coalesce(materialized version, defaultRowCommitVersion)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F

from deltalog import errors, row_tracking
from deltalog.spark.read.common import FILE, ROW, file_keys
from deltalog.spark.read.scan import scan_dataframe, through_seam
from deltalog.spark.session import arrow_to_df

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

METADATA = "_metadata"
_BASE, _DEFAULT = "__deltalog_base_row_id", "__deltalog_default_version"


def read_with_row_tracking(spark: Any, snapshot: Snapshot, store: LogStore) -> Any:
    """The rows of ``snapshot`` with a ``_metadata`` struct column of their row ids and row
    commit versions (see the module docstring).

    Raises:
        UnsupportedFeatureError: the table does not have row tracking enabled (its ids are not
            stable, as delta-spark refuses ``_metadata.row_id`` there), it names no
            materialized columns, or its files are read through the storage seam.
    """
    table = snapshot.table_root
    names = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
    if names is None:
        raise errors.UnsupportedFeatureError(
            "DELTA_ROW_TRACKING_NOT_ENABLED",
            "the rowTracking read option needs a table with row tracking enabled "
            "(delta.enableRowTracking=true and its materialized column names).",
            table=table,
            help="enable it with ALTER TABLE ... SET TBLPROPERTIES "
            "('delta.enableRowTracking'='true'), or read without the option.",
            features=("rowTracking",),
        )
    if through_seam(spark, snapshot):
        raise errors.UnsupportedFeatureError(
            "DELTA_ROW_TRACKING_READ_UNSUPPORTED",
            "row ids are read with Spark's parquet reader (its row_index), which cannot reach "
            "this table's storage from this session.",
            table=table,
            help="read with the session's Hadoop connector for the store configured.",
            features=("rowTracking",),
        )
    files = snapshot.all_files_arrow()
    df = scan_dataframe(spark, snapshot, store, files, row_ids=True, carried=names.names)
    df = _with_ids(spark, snapshot, files, names, df)
    metadata = F.struct(
        df[names.row_id].alias("row_id"),
        df[names.row_commit_version].alias("row_commit_version"),
        df[_BASE].alias("base_row_id"),
        df[_DEFAULT].alias("default_row_commit_version"),
    ).alias(METADATA)
    hidden = {FILE, ROW, _BASE, _DEFAULT, *names.names}
    return df.select(*(df[c] for c in df.columns if c not in hidden), metadata)


def tracked_scan(
    spark: Any,
    snapshot: Snapshot,
    store: LogStore,
    files: pa.Table,
    operation: str,
    *,
    row_ids: bool = False,
) -> tuple[Any, row_tracking.MaterializedColumns | None]:
    """The live rows of ``files`` (as :func:`~deltalog.spark.read.scan.scan_dataframe` reads
    them, :data:`FILE` and :data:`ROW` too with ``row_ids``) and, when the table has row
    tracking enabled, each row's id and commit version under the materialized columns' names
    (with those names): what a rewrite writes to keep them.

    Raises:
        UnsupportedFeatureError: ``DELTA_ROW_TRACKING_NOT_PRESERVED`` when the files are read
            through the storage seam (no ``row_index`` there).
    """
    names = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
    if names is None:
        return scan_dataframe(spark, snapshot, store, files, row_ids=row_ids), None
    if through_seam(spark, snapshot):
        raise errors.row_tracking_not_preserved(snapshot.table_root, operation)
    df = scan_dataframe(spark, snapshot, store, files, row_ids=True, carried=names.names)
    df = _with_ids(spark, snapshot, files, names, df)
    return df.drop(_BASE, _DEFAULT) if row_ids else df.drop(FILE, ROW, _BASE, _DEFAULT), names


def _with_ids(
    spark: Any,
    snapshot: Snapshot,
    files: pa.Table,
    names: row_tracking.MaterializedColumns,
    df: Any,
) -> Any:
    """``df`` (with :data:`FILE`, :data:`ROW` and the materialized columns as read) with the
    materialized columns replaced by the rows' ids and commit versions, and the files'
    ``baseRowId`` / ``defaultRowCommitVersion`` joined in."""
    ids = pa.table(
        {
            FILE: pa.array(file_keys(snapshot, files), pa.string()),
            _BASE: files.column("baseRowId").cast(pa.int64()),
            _DEFAULT: files.column("defaultRowCommitVersion").cast(pa.int64()),
        }
    )
    df = df.join(F.broadcast(arrow_to_df(spark, ids)), on=FILE, how="inner")
    row_id = F.coalesce(df[names.row_id], df[_BASE] + df[ROW])
    version = F.coalesce(df[names.row_commit_version], df[_DEFAULT])
    return df.withColumns({names.row_id: row_id, names.row_commit_version: version})
