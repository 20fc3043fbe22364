"""Dropping the rows deletion vectors delete from a scan, without a row per deleted row on the
driver unless a setting bounds them.

A scan (:func:`deltalog.spark.read.scan.scan_dataframe`) carries each row's file
(:data:`~deltalog.scan.plan.FILE`, its ``_metadata.file_path``) and physical index
(:data:`~deltalog.scan.plan.ROW`, its ``_metadata.row_index``); its inputs carry one descriptor
per file that has a vector (``ScanInputs.deletion_vectors``). :func:`drop_deleted_rows` chooses
by the descriptors' total cardinality against ``spark.deltalog.deletionVectors.broadcastRows``
(:data:`BROADCAST_ROWS_KEY`, default :data:`DEFAULT_BROADCAST_ROWS`; none when the session turned
Spark's broadcasts off):

* at most that many: the vectors are read on the driver into (file, row) pairs and removed by a
  broadcast anti-join (no Python worker round trip: the fastest for small vectors);
* more: the vectors are applied in the executors. Each row's file becomes a number by a
  broadcast join with a table of the files that have a vector (one row per file; files without
  one get ``-1``), and a scalar pandas UDF over (number, row index) answers whether the row is
  deleted. The UDF's closure holds the descriptors (:class:`VectorSet`, one per file); each
  Python worker reads a file's vector once through the storage seam, keeps it in a cache
  bounded in bytes, and tests rows against it with ``numpy.searchsorted``. The deleted rows
  never exist on the driver.

The UDF sees every row of the scan, files without a vector too (they answer ``False`` at once):
one scan keeps the plan's single parquet relation, which
:mod:`~deltalog.spark.read.pushdown` swaps for a pruned one. Filters applied to the read run
before the UDF (Spark evaluates a filter's parts without a Python UDF first), so a selective
query sends few rows through it. DataFrame APIs only: classic and Spark Connect sessions alike.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.scan.plan import FILE, ROW, VECTOR, ScanInputs, deleted_rows
from deltalog.spark.session import arrow_to_df, conf_get
from deltalog.storage import register, store_for
from deltalog.storage.options import StorageOptions, registered

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

BROADCAST_ROWS_KEY = "spark.deltalog.deletionVectors.broadcastRows"
# 100k pairs: ~10 MB as Arrow on the driver and as a broadcast relation, Spark's own default
# broadcast size (1M pairs are ~0.1 GB: bench/README.md).
DEFAULT_BROADCAST_ROWS = 100_000
NUMBER = "__deltalog_dv_number"
# Each Python worker keeps the vectors it read up to this many bytes (the last one always).
CACHE_BYTES = 256 * 2**20


def drop_deleted_rows(
    spark: Any, df: Any, inputs: ScanInputs, table_root: str, store: LogStore
) -> Any:
    """``df`` (a scan of ``inputs``' files with :data:`FILE` and :data:`ROW` columns) without
    the rows the files' deletion vectors delete; the same columns. ``table_root`` is the
    snapshot's (the vectors' paths are relative to it).

    Raises:
        InvalidArgumentError: the setting is not a whole number.
        InvalidTableError: (broadcast path) a vector's file is missing or does not match.
    """
    vectors = inputs.deletion_vectors
    if vectors is None:
        return df
    if inputs.deleted_row_count <= broadcast_rows(spark):
        pairs = arrow_to_df(spark, deleted_rows(table_root, store, vectors))
        return df.join(F.broadcast(pairs), on=[FILE, ROW], how="left_anti")
    return _drop_in_executors(spark, df, VectorSet.of(table_root, vectors), vectors[FILE])


def _drop_in_executors(spark: Any, df: Any, vectors: VectorSet, keys: pa.ChunkedArray) -> Any:
    """``df`` without the rows ``vectors`` delete, tested in the executors; ``keys`` are the
    :data:`FILE` keys of the files the vectors belong to, in the same order."""
    numbers = pa.table({FILE: keys, NUMBER: pa.array(range(len(keys)), pa.int32())})
    numbered = df.join(F.broadcast(arrow_to_df(spark, numbers)), on=FILE, how="left")
    number = F.coalesce(numbered[NUMBER], F.lit(-1).cast("int"))  # -1: a file without one
    deleted = deleted_udf(vectors)
    return numbered.where(~deleted(number, numbered[ROW])).drop(NUMBER)


def broadcast_rows(spark: Any) -> int:
    """The most deleted rows read on the driver and broadcast: the session's
    :data:`BROADCAST_ROWS_KEY`, or none when the session turned Spark's broadcasts off
    (``spark.sql.autoBroadcastJoinThreshold`` -1: its driver is not to hold built relations).

    Raises:
        InvalidArgumentError: the value is not a whole number.
    """
    if conf_get(spark, "spark.sql.autoBroadcastJoinThreshold", "10MB").strip() == "-1":
        return 0
    text = conf_get(spark, BROADCAST_ROWS_KEY, str(DEFAULT_BROADCAST_ROWS))
    try:
        return int(text)
    except ValueError:
        raise errors.invalid_argument(
            f"{BROADCAST_ROWS_KEY} must be a whole number of rows, not {text!r}"
        ) from None


@dataclasses.dataclass(frozen=True, slots=True)
class VectorSet:
    """The deletion vectors of a scan's files, by file number (position in ``descriptors``),
    as the executors apply them: ``table_root`` (the snapshot's) and ``storage`` (the object
    store's options registered on the driver; they travel to the workers pickled, and
    :class:`~deltalog.storage.options.StorageOptions` shows no values when printed)."""

    table_root: str
    descriptors: tuple[DeletionVectorDescriptor, ...]
    storage: StorageOptions

    @classmethod
    def of(cls, table_root: str, vectors: pa.Table) -> VectorSet:
        """From a ``ScanInputs.deletion_vectors`` table (numbers follow its rows)."""
        descriptors = tuple(
            DeletionVectorDescriptor.from_dict(dv) for dv in vectors[VECTOR].to_pylist()
        )
        return cls(table_root, descriptors, registered(table_root))

    def deleted(self, numbers: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Whether each row (file number, row index; a negative number is a file without a
        vector) is deleted: a boolean array as long as ``rows``.

        Raises:
            InvalidTableError: a vector's file is missing or does not match its descriptor.
        """
        out = np.zeros(len(rows), dtype=bool)
        if len(rows) == 0:
            return out
        first = numbers[0]
        if (numbers == first).all():  # a batch of a scan task: usually one file
            if first >= 0:
                out[:] = _contains(self.vector(int(first)), rows)
            return out
        for number in np.unique(numbers):
            if number >= 0:
                same = numbers == number
                out[same] = _contains(self.vector(int(number)), rows[same])
        return out

    def vector(self, number: int) -> np.ndarray:
        """File ``number``'s deleted row indexes (sorted ``int64``), read once per process.

        Raises:
            InvalidTableError: the vector's file is missing or does not match its descriptor.
        """
        descriptor = self.descriptors[number]
        key = (self.table_root, descriptor)
        found = _CACHE.get(key)
        if found is None:
            if self.storage.items:  # this worker's store_for finds the bucket's options
                register(self.table_root, self.storage)
            store = store_for(self.table_root)
            rows = read_deletion_vector(store, self.table_root, descriptor)
            found = _CACHE.put(key, rows.astype(np.int64))
        return found


def deleted_udf(vectors: VectorSet) -> Any:
    """A scalar pandas UDF ``(number int, row long) -> boolean`` answering
    :meth:`VectorSet.deleted` in the executors; ``vectors`` travels in its closure."""
    import pandas as pd  # only where the UDF is made (importing pandas costs ~0.3 s)
    from pyspark.sql.functions import pandas_udf

    def deleted(numbers: pd.Series, rows: pd.Series) -> pd.Series:
        return pd.Series(vectors.deleted(numbers.to_numpy(), rows.to_numpy()))

    # PySpark picks the UDF's kind from its type hints; postponed annotations are strings
    # naming a local import, which it cannot resolve, so the types are given as objects.
    deleted.__annotations__ = {"numbers": pd.Series, "rows": pd.Series, "return": pd.Series}
    return pandas_udf(deleted, "boolean")  # type: ignore[call-overload]


def _contains(vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` is in ``vector`` (sorted)."""
    if len(vector) == 0:
        return np.zeros(len(rows), dtype=bool)
    at = np.searchsorted(vector, rows)
    at[at == len(vector)] = 0
    return np.asarray(vector[at] == rows)


_Key = tuple[str, DeletionVectorDescriptor]  # (table root, descriptor)


class _VectorCache:
    """Vectors read by this process, least recently used dropped first past
    :data:`CACHE_BYTES` (the latest is kept whatever its size). Python workers live across
    tasks, so a file's vector is read once per worker, not once per batch or task."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._entries: OrderedDict[_Key, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: _Key) -> np.ndarray | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: _Key, rows: np.ndarray) -> np.ndarray:
        with self._lock:
            if key not in self._entries:
                self._entries[key] = rows
                self._bytes += rows.nbytes
            while self._bytes > self._budget and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.nbytes
            return self._entries.get(key, rows)


_CACHE = _VectorCache(CACHE_BYTES)
