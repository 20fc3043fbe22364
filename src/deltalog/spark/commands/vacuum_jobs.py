"""VACUUM's listing and deletes as Spark jobs (reference ``VacuumCommand.gc``, which lists
with ``DeltaFileOperations.recursiveListDirs`` and deletes in ``mapPartitions`` when
``spark.databricks.delta.vacuum.parallelDelete.enabled``).

:class:`SparkFileOps` is the pure core's :class:`~deltalog.commands.vacuum.file_ops.VacuumFileOps`
for a session:

* Listing: the driver lists the table root (files and directory names); when at least
  ``spark.sql.sources.parallelPartitionDiscovery.threshold`` of its directories are not hidden
  (unset: Spark's 32 on object stores, 1,000 on local or mounted paths, which one machine lists
  faster than a Spark job starts), tasks list them recursively, up to
  ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` tasks (unset:
  ``spark.sql.shuffle.partitions``, as a Python task costs far more to start than the
  reference's JVM ones); below it the driver lists them. Both filter with the core's
  :func:`~deltalog.commands.vacuum.files.filter_listing`, so the candidates are the same.
* Deletes: in ``spark.databricks.delta.vacuum.parallelDelete.parallelism`` tasks (default
  ``spark.sql.shuffle.partitions``) when ``...parallelDelete.enabled``, else on driver threads.

Tasks reach the files through :func:`deltalog.storage.store_for` with the session's storage
options (they travel pickled with the task), so object-store tables work without Hadoop jars.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from deltalog.commands.vacuum.file_ops import DriverFileOps, delete_files
from deltalog.commands.vacuum.files import (
    CANDIDATE_SCHEMA,
    HiddenNames,
    Listing,
    count_directories,
    list_under,
    top_level,
)
from deltalog.spark.session import arrow_to_df, conf_get, to_arrow
from deltalog.spark.storage import register_session
from deltalog.storage import StorageOptions, is_remote, store_for
from deltalog.storage.base import LogStore

LISTING_THRESHOLD_KEY = "spark.sql.sources.parallelPartitionDiscovery.threshold"
LISTING_PARALLELISM_KEY = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
PARALLEL_DELETE_KEY = "spark.databricks.delta.vacuum.parallelDelete.enabled"
DELETE_PARALLELISM_KEY = "spark.databricks.delta.vacuum.parallelDelete.parallelism"
SHUFFLE_PARTITIONS_KEY = "spark.sql.shuffle.partitions"
LOCAL_LISTING_THRESHOLD = 1000
_LISTED = "path string, size long, modificationTime long"


@dataclass(frozen=True)
class SparkFileOps:
    """VACUUM's listing and deletes on a Spark session (see the module docstring).

    Attributes:
        listing_threshold: top-level directories from which the listing runs in tasks.
        listing_parallelism: at most this many listing tasks.
        parallel_delete: delete in tasks rather than on driver threads.
        delete_parallelism: delete tasks.
    """

    spark: SparkSession
    options: StorageOptions
    listing_threshold: int = 32
    listing_parallelism: int = 10_000
    parallel_delete: bool = False
    delete_parallelism: int = 200
    driver: DriverFileOps = field(default_factory=DriverFileOps)

    @classmethod
    def for_session(cls, spark: SparkSession, root: str) -> SparkFileOps:
        """The session's settings for the table at ``root``."""
        shuffle = _int(spark, SHUFFLE_PARTITIONS_KEY, 200)
        default_threshold = 32 if is_remote(root) else LOCAL_LISTING_THRESHOLD
        return cls(
            spark,
            register_session(spark, root),
            listing_threshold=_int(spark, LISTING_THRESHOLD_KEY, default_threshold),
            listing_parallelism=_int(spark, LISTING_PARALLELISM_KEY, shuffle),
            parallel_delete=conf_get(spark, PARALLEL_DELETE_KEY, "false").lower() == "true",
            delete_parallelism=_int(spark, DELETE_PARALLELISM_KEY, shuffle),
        )

    def list_files(self, store: LogStore, root: str, hidden: HiddenNames) -> Listing:
        files, directories = top_level(store, root, hidden)
        if len(directories) >= self.listing_threshold:
            below = self._list_in_tasks(root, directories, hidden)
        else:
            below = list_under(store, root, directories, hidden)
        table = pa.concat_tables([files, below])
        return Listing(table, count_directories(root, table["path"]))

    def delete_files(self, store: LogStore, paths: Sequence[str]) -> int:
        if not self.parallel_delete or len(paths) < 2:
            return self.driver.delete_files(store, paths)
        df = arrow_to_df(self.spark, pa.table({"path": pa.array(list(paths), pa.string())}))
        # Any path of the table picks its store (scheme and bucket).
        task = functools.partial(_delete_task, where=paths[0], options=self.options)
        counts = to_arrow(
            df.repartition(min(self.delete_parallelism, len(paths))).mapInArrow(
                task, "deleted long"
            )
        )
        return int(pc.sum(counts["deleted"]).as_py() or 0)

    def _list_in_tasks(self, root: str, directories: list[str], hidden: HiddenNames) -> pa.Table:
        df = arrow_to_df(self.spark, pa.table({"directory": pa.array(directories, pa.string())}))
        task = functools.partial(_list_task, root=root, hidden=hidden, options=self.options)
        tasks = max(1, min(len(directories), self.listing_parallelism))
        listed = to_arrow(df.repartition(tasks).mapInArrow(task, _LISTED))
        return listed.cast(CANDIDATE_SCHEMA)


def _list_task(
    batches: Iterator[pa.RecordBatch], *, root: str, hidden: HiddenNames, options: StorageOptions
) -> Iterator[pa.RecordBatch]:
    """Runs on executors: the candidates below this task's top-level directories."""
    store = store_for(root, options)
    for batch in batches:
        found = list_under(store, root, batch.column(0).to_pylist(), hidden)
        yield from found.to_batches()


def _delete_task(
    batches: Iterator[pa.RecordBatch], *, where: str, options: StorageOptions
) -> Iterator[pa.RecordBatch]:
    """Runs on executors: delete this task's paths, yield how many existed."""
    store = store_for(where, options)
    for batch in batches:
        deleted = delete_files(store, batch.column(0).to_pylist())
        yield pa.record_batch([pa.array([deleted], pa.int64())], names=["deleted"])


def _int(spark: SparkSession, key: str, default: int) -> int:
    try:
        return int(conf_get(spark, key, str(default)))
    except ValueError:
        return default
