"""The rows a change-feed plan's deletion vectors select, built in Spark's executors.

A plan row that reads a file with deletion vectors names them by descriptor
(:data:`deltalog.change_data_feed.PLAN_SCHEMA`): ``EXCEPT_ROWS`` keeps every row but a vector's
(a file removed or added with its vector), ``ONLY_ROWS`` only the rows of one vector the other
does not hold (a vector replaced inside a commit). :func:`select_rows` applies them to Spark's
parquet scan of the plan's data files (each scanned row carries its plan row, :data:`SPEC`, and
its index in the file, :data:`ROW`):

* :func:`selection_pairs` turns the descriptors into (``SPEC``, ``ROW``) pairs in tasks
  (``spark.range(n).mapInArrow``: one plan row per id, its vectors read through the storage
  seam on the executor), so no row index passes through the driver's Python process, which
  holds O(files) whatever the vectors delete;
* the scan is left-joined to the pairs, and a row is kept by its plan row's mode: every row, a
  row without a pair (``EXCEPT_ROWS``, the anti-join), or a row with one (``ONLY_ROWS``).

The join is a broadcast when the pairs are few: at most :data:`BROADCAST_ROWS`, bounded from the
descriptors' cardinalities without reading a vector. Otherwise it is a shuffled hash join
(hinted: Spark's size estimate of a ``mapInArrow`` over a small range is tiny, so it would
broadcast a million pairs through the driver's JVM unasked).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deltalog.change_data_feed import (
    ALL_ROWS,
    EXCEPT_ROWS,
    ONLY_ROWS,
    selection_bound,
    vector_rows,
)
from deltalog.spark.read.common import ROW
from deltalog.spark.session import conf_get, default_parallelism
from deltalog.storage import register, store_for
from deltalog.storage.options import StorageOptions, registered

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

SPEC, MODE, HIT = "__deltalog_spec", "__deltalog_mode", "__deltalog_hit"
# Selections of at most this many (plan row, row) pairs are broadcast to the scan's tasks.
BROADCAST_ROWS = 200_000
_BATCH_ROWS = 64 * 1024

PAIRS_SCHEMA = T.StructType(
    [
        T.StructField(SPEC, T.LongType(), True),
        T.StructField(ROW, T.LongType(), True),
        T.StructField(HIT, T.BooleanType(), True),
    ]
)


@dataclasses.dataclass(frozen=True, slots=True)
class VectorSpec:
    """One selecting plan row: its id and its deletion vectors (descriptors, JSON)."""

    spec_id: int
    vector: str
    minus: str | None


def select_rows(
    spark: SparkSession, table_root: str, files: pa.Table, df: DataFrame, store: LogStore
) -> Any:
    """The rows of ``df`` (a scan joined to the plan rows ``files``: columns :data:`SPEC`,
    :data:`MODE` and, when a plan row selects rows, :data:`ROW`) that their plan rows keep,
    without those three columns; ``store`` is the table's (its options reach the vectors)."""
    pairs = selection_pairs(spark, table_root, files, worker_storage(table_root, store))
    if pairs is None:
        return df.drop(SPEC, MODE, ROW)
    df = df.join(pairs, on=[SPEC, ROW], how="left")
    hit = F.col(HIT).isNotNull()
    keep = (
        (F.col(MODE) == ALL_ROWS)
        | ((F.col(MODE) == EXCEPT_ROWS) & ~hit)
        | ((F.col(MODE) == ONLY_ROWS) & hit)
    )
    return df.where(keep).drop(SPEC, MODE, ROW, HIT)


def selection_pairs(
    spark: SparkSession, table_root: str, files: pa.Table, storage: StorageOptions
) -> DataFrame | None:
    """(:data:`SPEC`, :data:`ROW`, :data:`HIT`) for every row index the vectors of the plan rows
    ``files`` refer to, computed in tasks that reach the table with ``storage``, hinted for the
    join (broadcast or shuffled hash, see the module docstring); ``None`` when no plan row
    selects rows."""
    selecting = files.filter(pc.not_equal(files["mode"], ALL_ROWS))
    if selecting.num_rows == 0:
        return None
    specs = tuple(
        VectorSpec(
            int(r["spec_id"]),
            json.dumps(r["vector"]),
            None if r["minusVector"] is None else json.dumps(r["minusVector"]),
        )
        for r in selecting.select(["spec_id", "vector", "minusVector"]).to_pylist()
    )
    expand = ExpandVectors(table_root, specs, storage)
    n = len(specs)
    pairs = spark.range(0, n, 1, min(n, _parallelism(spark))).mapInArrow(expand, PAIRS_SCHEMA)
    if selection_bound(selecting) <= BROADCAST_ROWS:
        return F.broadcast(pairs)
    return pairs.hint("shuffle_hash")


def worker_storage(table_root: str, store: LogStore) -> StorageOptions:
    """The storage options a worker needs to reach the table: those registered for its bucket
    in this process, under the options of the store the plan was read with (a load's own
    options reach its store, not the registry)."""
    own = getattr(store, "options", None)
    base = registered(table_root)
    return base.merged(own) if isinstance(own, StorageOptions) else base


def _parallelism(spark: SparkSession) -> int:
    known = default_parallelism(spark)
    if known is not None:
        return known
    value = conf_get(spark, "spark.sql.shuffle.partitions", "200")  # Spark Connect
    return int(value) if value.isdigit() and int(value) > 0 else 200


class ExpandVectors:
    """The function each task runs: for each plan row whose position in ``specs`` it is given,
    the row indexes its vectors select, as (SPEC, ROW, HIT) batches."""

    def __init__(
        self, table_root: str, specs: tuple[VectorSpec, ...], storage: StorageOptions
    ) -> None:
        self.table_root = table_root
        self.specs = specs
        self.storage = storage  # an object store's options, for the workers

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.storage.items:
            register(self.table_root, self.storage)  # this worker's store_for finds them
        store = store_for(self.table_root)
        for batch in batches:
            for position in batch.column(0).to_pylist():
                spec = self.specs[position]
                minus = None if spec.minus is None else json.loads(spec.minus)
                rows = vector_rows(store, self.table_root, json.loads(spec.vector), minus)
                for start in range(0, len(rows), _BATCH_ROWS):
                    chunk = rows[start : start + _BATCH_ROWS]
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array(np.full(len(chunk), spec.spec_id, dtype=np.int64)),
                            pa.array(chunk, pa.int64()),
                            pa.array(np.ones(len(chunk), dtype=bool)),
                        ],
                        names=[SPEC, ROW, HIT],
                    )
