"""State reconstruction on Spark (reference ``Snapshot.stateReconstruction``).

The checkpoint and the commits after it become one DataFrame of log rows tagged with their
version; it is repartitioned by canonical file path into ``snapshot_partitions`` partitions (all
non-file actions share the null key and so one partition), sorted by version within each, and
every partition is replayed by :class:`~deltalog.log.replay.InMemoryLogReplay` inside
``mapInArrow``. Because every action on a path lands in one partition, per-partition replays
are independent and their union is the table state. The result is persisted until the snapshot
is replaced.

Only DataFrame APIs are used, so this runs on classic and Spark Connect sessions alike.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel, TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.actions import ADD_SCHEMA, REMOVE_SCHEMA, REPLAY_SCHEMA, Sidecar
from deltalog.fields import conform_table
from deltalog.log.checkpoint_writer import WrittenSidecar, file_rows, write_sidecar
from deltalog.log.filenames import CheckpointFormat
from deltalog.log.reader import checkpoint_sidecar_paths
from deltalog.log.replay import InMemoryLogReplay
from deltalog.spark.read.log_schema import FILE_LOG_SCHEMA, REPLAY_LOG_SCHEMA, log_schema
from deltalog.spark.session import NO_LISTING_JOB, conf_get, reader, to_arrow
from deltalog.spark.session_clone import adopt, clone_with
from deltalog.spark.storage import register_session
from deltalog.storage import store_for

if TYPE_CHECKING:
    from deltalog.log.segment import LogSegment
    from deltalog.storage.base import LogStore

SNAPSHOT_PARTITIONS_KEY = "spark.databricks.delta.snapshotPartitions"
DEFAULT_SNAPSHOT_PARTITIONS = 50
# Log bytes per state partition when the setting is unset. The reference's fixed 50 partitions
# are cheap JVM tasks; here each is a Python task (about 50-80 ms of fixed cost), so a small log
# is replayed in as few partitions as its size needs, and a big one in the reference's 50.
LOG_BYTES_PER_PARTITION = 8 << 20
VERSION_COLUMN = "version"


class SparkState:
    """The file state of one segment, reconstructed lazily on Spark and cached.

    Attributes:
        min_file_retention_timestamp: tombstone expiry (set by the snapshot once metadata is known).
    """

    def __init__(
        self,
        spark: SparkSession,
        table_root: str,
        segment: LogSegment,
        store: LogStore,
        snapshot_partitions: int | None = None,
    ) -> None:
        self.spark = spark
        self.store = store
        self.table_root = table_root
        self.segment = segment
        self.snapshot_partitions = snapshot_partitions or state_partitions(
            conf_get(spark, SNAPSHOT_PARTITIONS_KEY, ""), segment
        )
        self.min_file_retention_timestamp: int | None = None
        self._df: Any = None
        # Collected once: count, size, describe and the file list all read the same rows.
        self._collected: dict[str, pa.Table] = {}

    @property
    def dataframe(self) -> Any:
        """The reconstructed state as log rows (cached on first use)."""
        if self._df is None:
            sidecars = (
                []
                if self.segment.checkpoint is None
                else checkpoint_sidecar_paths(
                    self.store, self.segment.checkpoint, table=self.table_root
                )
            )
            self._df = reconstruct(
                self.spark,
                self.segment,
                sidecars,
                self.snapshot_partitions,
                self.min_file_retention_timestamp,
            )
        return self._df

    def active_files(self) -> pa.Table:
        return self._collect("add", ADD_SCHEMA)

    def tombstones(self) -> pa.Table:
        return self._collect("remove", REMOVE_SCHEMA)

    def _collect(self, key: str, struct: pa.StructType) -> pa.Table:
        if key in self._collected:
            return self._collected[key]
        try:
            df = self.dataframe.where(F.col(key).isNotNull()).select(f"{key}.*")
            table = to_arrow(df)
        except errors.DeltaError:
            raise
        except Exception as e:  # Spark reports a corrupt log line or file as a job failure
            self.uncache()
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise errors.InvalidTableError(
                "DELTA_CORRUPT_LOG",
                f"reconstructing version {self.segment.version} on Spark failed: {first[:500]}",
                table=self.table_root,
                help="a commit or checkpoint file is damaged; restore it from a backup.",
            ) from e
        self._collected[key] = conform_table(table, pa.schema(list(struct)))
        return self._collected[key]

    def write_sidecars(self, store: LogStore, version: int, options: Any) -> list[Any] | None:
        """See :func:`write_sidecars` (V2 checkpoint sidecars written in Spark tasks)."""
        return write_sidecars(self, store, version, options)

    def uncache(self) -> None:
        self._collected.clear()
        if self._df is not None:
            self._df.unpersist()
            self._df = None


def state_partitions(setting: str, segment: LogSegment) -> int:
    """``spark.databricks.delta.snapshotPartitions`` when set (non-empty); otherwise one
    partition per :data:`LOG_BYTES_PER_PARTITION` of the segment's checkpoint and commits, at
    most the reference's 50. A V2 checkpoint's sidecars are not listed in the segment, so such
    a log gets 50."""
    if setting:
        return int(setting)
    cp = segment.checkpoint
    if cp is not None and cp.format == CheckpointFormat.V2:
        return DEFAULT_SNAPSHOT_PARTITIONS
    size = (cp.size_in_bytes if cp is not None else 0) + sum(c.file.size for c in segment.commits)
    return max(1, min(DEFAULT_SNAPSHOT_PARTITIONS, -(-size // LOG_BYTES_PER_PARTITION)))


def reconstruct(
    spark: SparkSession,
    segment: LogSegment,
    sidecars: list[str],
    num_partitions: int,
    min_file_retention_timestamp: int | None,
) -> Any:
    """The file state of ``segment`` (``add`` / ``remove`` rows), persisted."""
    # Only file actions cross into Python: the driver already replayed the non-file actions, and
    # Spark's Arrow conversion of nested log rows is what this job spends its time on.
    actions = load_actions(spark, segment, sidecars)
    actions = actions.where(F.col("add").isNotNull() | F.col("remove").isNotNull()).select(
        "add", "remove", VERSION_COLUMN
    )
    path = F.coalesce(F.col("add.path"), F.col("remove.path"))
    canonical = F.regexp_replace(F.regexp_replace(path, "^file:///", "file:/"), "^/", "file:/")
    replay = functools.partial(
        replay_partition, min_file_retention_timestamp=min_file_retention_timestamp
    )
    state = (
        actions.repartition(num_partitions, canonical)
        .sortWithinPartitions(VERSION_COLUMN)
        .mapInArrow(replay, FILE_LOG_SCHEMA)
    )
    return state.persist(StorageLevel.MEMORY_AND_DISK)


def load_actions(spark: SparkSession, segment: LogSegment, sidecars: list[str]) -> Any:
    """Checkpoint rows (with ``sidecars``) and commit rows of ``segment`` as one DataFrame with a
    version column.

    On a classic session the files are read in a clone of it that lists no paths in a job
    (:func:`~deltalog.spark.read.common.read_parquet_files`); on Spark Connect, more commits
    than the session's discovery threshold are listed in a job."""
    clone = clone_with(spark, NO_LISTING_JOB)
    if clone is None:
        return _load_actions(spark, segment, sidecars)
    return adopt(spark, _load_actions(clone, segment, sidecars))


def _load_actions(spark: SparkSession, segment: LogSegment, sidecars: list[str]) -> Any:
    frames = []
    if segment.checkpoint is not None:
        cp = segment.checkpoint
        paths = [f.path for f in cp.files if f.name.endswith(".parquet")]
        json_paths = [f.path for f in cp.files if f.name.endswith(".json")]
        paths += sidecars
        if paths:
            frames.append(
                reader(spark)
                .schema(REPLAY_LOG_SCHEMA)
                .parquet(*paths)
                .withColumn(VERSION_COLUMN, F.lit(cp.version).cast("long"))
            )
        if json_paths:
            frames.append(_read_json(spark, json_paths, F.lit(cp.version).cast("long")))
    if segment.commits:
        version = F.regexp_extract(F.col("_metadata.file_name"), r"^(\d+)\.json$", 1).cast("long")
        frames.append(_read_json(spark, [c.path for c in segment.commits], version))
    if not frames:
        return spark.createDataFrame([], log_schema(REPLAY_SCHEMA.names)).withColumn(
            VERSION_COLUMN, F.lit(0).cast("long")
        )
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    # Only file actions and the non-file actions replay needs; drop rows with neither.
    keep = F.lit(False)
    for key in REPLAY_SCHEMA.names:
        keep = keep | F.col(key).isNotNull()
    return out.where(keep)


def replay_partition(
    batches: Iterator[pa.RecordBatch], *, min_file_retention_timestamp: int | None
) -> Iterator[pa.RecordBatch]:
    """Replay one path-partition (rows sorted by version) and emit its file state as log rows.

    Runs on executors: a top-level function so it pickles.
    """
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    rows = pa.concat_tables(tables).drop_columns([VERSION_COLUMN])
    replay = InMemoryLogReplay(min_file_retention_timestamp)
    # As in the reference, one partition is appended as a single "version": the rows are already
    # in version order, and within a valid commit no key has two actions.
    replay.append(0, rows)
    state = replay.checkpoint().select(list(FILE_LOG_SCHEMA.names))
    yield from state.to_batches(max_chunksize=10_000)


def _read_json(spark: SparkSession, paths: list[str], version: Any) -> Any:
    # FAILFAST: a corrupt line must fail the job, never become a row of nulls.
    return (
        reader(spark)
        .schema(REPLAY_LOG_SCHEMA)
        .option("mode", "FAILFAST")
        .json(paths)
        .select(*REPLAY_SCHEMA.names, version.alias(VERSION_COLUMN))
    )


# -- V2 checkpoint sidecars written by this engine ------------------------------------------------

CHECKPOINT_THRESHOLD_KEY = "spark.deltalog.checkpoint.parallelWrite.threshold"
DEFAULT_CHECKPOINT_THRESHOLD = 100_000
_SIDECAR_RESULT = "name string, size long, modificationTime long, actions long, adds long"


def write_sidecars(
    state: SparkState, store: LogStore, version: int, options: Any
) -> list[Any] | None:
    """The state's file actions as V2 sidecars, one per state partition, written in Spark tasks
    (``None`` below ``spark.deltalog.checkpoint.parallelWrite.threshold`` live files: the
    driver writes them then).

    Each task turns its rows into checkpoint rows with the core's
    :func:`~deltalog.log.checkpoint_writer.file_rows` and writes them with
    :func:`~deltalog.log.checkpoint_writer.write_sidecar` (which checks the parquet holds every
    row). The driver then checks that the sidecars hold as many live files as the state; if
    not, it deletes them (no top-level file names them yet) and raises.

    Raises:
        InternalError: ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH``.
    """
    threshold = int(
        conf_get(state.spark, CHECKPOINT_THRESHOLD_KEY, str(DEFAULT_CHECKPOINT_THRESHOLD))
    )
    df = state.dataframe
    live = df.where(F.col("add").isNotNull()).count()
    if live < threshold:
        return None
    log_root = state.segment.log_root
    task = functools.partial(
        _sidecar_task,
        log_root=log_root,
        version=version,
        count=state.snapshot_partitions,
        options=register_session(state.spark, state.table_root),
    )
    out = to_arrow(df.mapInArrow(task, _SIDECAR_RESULT)).to_pylist()
    written = [
        WrittenSidecar(
            Sidecar(r["name"], r["size"], r["modificationTime"]), r["actions"], r["adds"]
        )
        for r in out
    ]
    adds = sum(w.num_adds for w in written)
    if adds != live:
        for w in written:
            store.delete(f"{log_root}/_sidecars/{w.sidecar.path}")
        raise errors.checkpoint_snapshot_mismatch(state.table_root, version, adds, live)
    return written


def _sidecar_task(
    batches: Iterator[pa.RecordBatch], *, log_root: str, version: int, count: int, options: Any
) -> Iterator[pa.RecordBatch]:
    """Runs on executors: this partition's add/remove rows as one sidecar."""
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    rows = pa.concat_tables(tables).combine_chunks()
    adds = rows["add"].filter(pc.is_valid(rows["add"])).combine_chunks()
    removes = rows["remove"].filter(pc.is_valid(rows["remove"])).combine_chunks()
    files = file_rows(_flat(adds), _flat(removes), v2=True)
    context = TaskContext.get()
    index = context.partitionId() + 1 if context is not None else 1
    store = store_for(log_root, options)
    w = write_sidecar(store, log_root, version, index, count, files)
    s = w.sidecar
    yield pa.RecordBatch.from_pylist(
        [
            {
                "name": s.path,
                "size": s.size_in_bytes,
                "modificationTime": s.modification_time,
                "actions": w.num_actions,
                "adds": w.num_adds,
            }
        ]
    )


def _flat(structs: pa.Array) -> pa.Table:
    """A struct array as a table of its fields (the form the snapshot's accessors give)."""
    kind: pa.StructType = structs.type
    return pa.Table.from_arrays(structs.flatten(), names=[f.name for f in kind])
