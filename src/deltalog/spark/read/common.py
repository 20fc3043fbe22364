"""What Spark's reads of a table share: the row-id columns, Spark's parquet reader over an exact
list of files, and small Arrow tables as DataFrames.

:data:`FILE` and :data:`ROW` (from :mod:`deltalog.scan.plan`) name the columns a scan adds for
deletion vectors and the commands: each row's file (its ``_metadata.file_path``, as
:func:`file_keys` gives it) and its physical row index in that file. The readers
(:mod:`~deltalog.spark.read.scan`, :mod:`~deltalog.spark.read.changes`,
:mod:`~deltalog.spark.read.listed`), the writers and the commands import them from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from deltalog import errors
from deltalog.scan.plan import FILE, ROW, WHOLE, local_paths, spark_file_uris
from deltalog.spark.session import NO_LISTING_JOB, is_connect, reader
from deltalog.spark.session_clone import adopt, clone_with

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

__all__ = [
    "FIELD_ID_READ",
    "FILE",
    "NAN_SAFE_OPTIONS",
    "ROW",
    "WHOLE",
    "file_keys",
    "has_floating",
    "newline_joined",
    "read_files_or_raise",
    "read_parquet_files",
]

# Column mapping mode ``id`` resolves parquet columns by field id. The parquet reader copies this
# session setting into every read's Hadoop configuration, over any read option of that name.
FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"

# parquet-mr's row-group filters trust footers that pyarrow, delta-rs and deltalog's own older
# files write for floating columns: min/max that ignore NaN (Spark's NaN is above every number,
# so ``v > 5`` drops a file holding NaN) and dictionaries that keep -0.0 apart from 0.0
# (``v = 0`` drops a file holding only -0.0). Reads of a table with such a column switch the
# three filters off; Spark's own filter of the rows then decides, as it must.
NAN_SAFE_OPTIONS = {
    "parquet.filter.dictionary.enabled": "false",
    "parquet.filter.stats.enabled": "false",
    "parquet.filter.columnindex.enabled": "false",
}


def file_keys(snapshot: Snapshot, files: pa.Table) -> list[str]:
    """Each file's ``_metadata.file_path`` as Spark reports it (the join key of row ids)."""
    paths = local_paths(snapshot.table_root, files["path"])
    return [str(k) for k in spark_file_uris(paths).to_pylist()]


def read_parquet_files(
    spark: SparkSession,
    schema: StructType,
    paths: Sequence[str] | pa.Array,
    base_path: str | None = None,
    *,
    field_ids: bool = False,
) -> DataFrame:
    """Spark's parquet reader over exactly ``paths`` (partition columns from the directories
    under ``base_path`` when given: ``schema`` then names them too); with ``field_ids``,
    columns are matched by the parquet field ids of ``schema`` (column mapping mode ``id``);
    without parquet-mr's row-group filters when ``schema`` has a floating column
    (:data:`NAN_SAFE_OPTIONS`).

    The user's session is left as it is. On a classic session the read is built in a clone of
    it (:mod:`~deltalog.spark.session_clone`) where the paths are stat'ed on the driver
    without a listing job, and field ids are read when asked; the list crosses py4j as one
    string split in the JVM (PySpark's own conversion makes one gateway round trip per path:
    seconds for 10k files). On Spark Connect, Spark lists more paths than the session's
    ``spark.sql.sources.parallelPartitionDiscovery.threshold`` in a job at each execution, and
    ``field_ids`` cannot be honoured: callers read such tables through the storage seam.
    """
    settings = {**NO_LISTING_JOB, FIELD_ID_READ: "true"} if field_ids else NO_LISTING_JOB
    clone = clone_with(spark, settings)
    if clone is None:
        assert not field_ids, "Spark Connect reads by field id through the storage seam"
        return _read(spark, schema, paths, base_path)
    return adopt(spark, _read(clone, schema, paths, base_path))


def _read(
    spark: SparkSession,
    schema: StructType,
    paths: Sequence[str] | pa.Array,
    base_path: str | None,
) -> DataFrame:
    read = reader(spark).schema(schema)
    if has_floating(schema):
        read = read.options(**NAN_SAFE_OPTIONS)
    if base_path is not None:
        read = read.option("basePath", base_path)
    joined = newline_joined(paths)
    if is_connect(spark) or joined is None:
        listed = paths.to_pylist() if isinstance(paths, pa.Array) else list(paths)
        return read.parquet(*listed)

    jvm: Any = spark.sparkContext._jvm
    seq = jvm.scala.io.Source.fromString(joined).getLines().toList()
    return DataFrame(read._jreader.parquet(seq), spark)


def has_floating(data_type: Any) -> bool:
    """Whether a Spark type holds a float or double at any depth (structs, arrays, maps); a
    type given otherwise (DDL text) counts as holding one."""
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return True
    if isinstance(data_type, T.StructType):
        return any(has_floating(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return has_floating(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return has_floating(data_type.keyType) or has_floating(data_type.valueType)
    return not isinstance(data_type, T.DataType)


def newline_joined(paths: Sequence[str] | pa.Array) -> str | None:
    """The paths joined by newlines (``None`` when a path has a line break)."""
    if not isinstance(paths, pa.Array):
        paths = pa.array(list(paths), pa.string())
    if pc.any(pc.match_substring_regex(paths, "[\\r\\n]")).as_py():
        return None
    whole = pa.ListArray.from_arrays(pa.array([0, len(paths)], pa.int32()), paths)
    return str(pc.binary_join(whole, "\n")[0].as_py())


def read_files_or_raise(
    spark: SparkSession,
    schema: StructType,
    paths: Sequence[str] | pa.Array,
    table_root: str,
    store: LogStore,
    *,
    base_path: str | None = None,
    field_ids: bool = False,
) -> DataFrame:
    """:func:`read_parquet_files`, with a missing file reported as a typed error naming it.

    Spark checks every path while planning (it stats them anyway); only when it fails are the
    paths checked here, to name the missing one.

    Raises:
        InvalidTableError: a data file named in the log does not exist (DELTA_FILE_NOT_FOUND).
    """
    try:
        return read_parquet_files(spark, schema, paths, base_path, field_ids=field_ids)
    except Exception as e:
        listed = paths.to_pylist() if isinstance(paths, pa.Array) else paths
        missing = next((p for p in listed if not store.exists(p)), None)
        if missing is None:
            raise
        raise errors.InvalidTableError(
            "DELTA_FILE_NOT_FOUND",
            f"data file {missing}, named in the log, does not exist.",
            table=table_root,
            help="restore the file, or repair the table (FSCK) to drop it from the log.",
        ) from e
