"""CONVERT TO DELTA's footer reads as a Spark job (the reference reads the files' schemas and
stats in Spark tasks too).

:func:`footer_reader` gives the pure core's
:data:`~deltalog.commands.convert.FooterReader` for a session: below
``spark.deltalog.convert.parallelFooters.threshold`` files (1,000 by default) it is the
driver's thread pool; from there on the paths are spread over up to
``spark.sql.shuffle.partitions`` tasks, each reading its footers with the core's
:func:`~deltalog.commands.convert.read_footer` and sending them back pickled (a footer is a few
kilobytes). Statistics and the schema are then built on the driver from the same footers the
driver path reads, so both paths commit the same log. A file that is not parquet, or gone, is
reported by the task as data and raised on the driver as the driver path raises it.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import SparkSession

from deltalog.commands.convert import FooterReader, read_footer, read_footers
from deltalog.errors import manage as manage_errors
from deltalog.spark.session import arrow_to_df, conf_get, to_arrow
from deltalog.spark.storage import register_session
from deltalog.storage import StorageOptions, store_for
from deltalog.storage.base import LogStore

if TYPE_CHECKING:
    import pyarrow.parquet as pq

THRESHOLD_KEY = "spark.deltalog.convert.parallelFooters.threshold"
DEFAULT_THRESHOLD = 1000
_MISSING, _NOT_PARQUET = "missing", "not parquet"
_READ = "i long, footer binary, error string"


def footer_reader(spark: SparkSession, root: str) -> FooterReader:
    """The session's footer reader for the directory at ``root`` (see the module docstring)."""
    try:
        threshold = int(conf_get(spark, THRESHOLD_KEY, str(DEFAULT_THRESHOLD)))
    except ValueError:
        threshold = DEFAULT_THRESHOLD
    tasks = int(conf_get(spark, "spark.sql.shuffle.partitions", "200"))
    options = register_session(spark, root)

    def read(
        store: LogStore, table: str, paths: Sequence[str], source_format: str
    ) -> list[pq.FileMetaData]:
        if len(paths) < threshold:
            return read_footers(store, table, paths, source_format)
        return _read_in_tasks(spark, options, tasks, table, paths, source_format)

    return read


def _read_in_tasks(
    spark: SparkSession,
    options: StorageOptions,
    tasks: int,
    root: str,
    paths: Sequence[str],
    source_format: str,
) -> list[pq.FileMetaData]:
    listed = pa.table({"i": pa.array(range(len(paths)), pa.int64()), "path": list(paths)})
    task = functools.partial(_footer_task, where=root, options=options)
    df = arrow_to_df(spark, listed).repartition(max(1, min(tasks, len(paths))))
    out = to_arrow(df.mapInArrow(task, _READ)).sort_by("i")
    if out.num_rows != len(paths):
        raise RuntimeError(f"read {out.num_rows} footers of {len(paths)} files under {root}")
    footers = []
    for i, blob, error in zip(
        out["i"].to_pylist(), out["footer"].to_pylist(), out["error"].to_pylist(), strict=True
    ):
        if error == _MISSING:
            raise FileNotFoundError(paths[i])
        if error is not None:
            raise manage_errors.convert_non_parquet_table(root, source_format)
        footers.append(pickle.loads(blob))
    return footers


def _footer_task(
    batches: Iterator[pa.RecordBatch], *, where: str, options: StorageOptions
) -> Iterator[pa.RecordBatch]:
    """Runs on executors: ``(i, pickled footer, error)`` for this task's files."""
    store = store_for(where, options)
    for batch in batches:
        ids: list[int] = []
        blobs: list[bytes | None] = []
        errors_: list[str | None] = []
        for i, path in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            ids.append(i)
            try:
                meta = read_footer(store, path)
            except FileNotFoundError:
                blobs.append(None)
                errors_.append(_MISSING)
                continue
            blobs.append(None if meta is None else pickle.dumps(meta))
            errors_.append(_NOT_PARQUET if meta is None else None)
        yield pa.record_batch(
            [pa.array(ids, pa.int64()), pa.array(blobs, pa.binary()), pa.array(errors_)],
            names=["i", "footer", "error"],
        )
