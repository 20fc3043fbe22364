"""MERGE's source, materialized once (reference ``MergeIntoMaterializeSource``) with a stable
id per row, so that the rows matched in the first phase are known by id in the second."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from deltalog.spark.commands.cached_source import over_cache
from deltalog.spark.commands.merge_clauses import SOURCE_ID
from deltalog.spark.session import free_local_checkpoint, is_connect


def materialized(
    given: DataFrame, spark: SparkSession
) -> tuple[DataFrame, int, Callable[[], object]]:
    """The source with a stable id per row (:data:`SOURCE_ID`), materialized once (the
    reference's ``MergeIntoMaterializeSource``), its row count, and the function that frees
    it.

    The rows that matched are found once and the others inserted without joining the target
    a second time, so the ids must not change between the two reads. On a classic session a
    source the caller cached or persisted whole is read from its cached relation
    (:func:`~deltalog.spark.commands.cached_source.over_cache`), without a checkpoint; any
    other is local-checkpointed: its lineage is cut, so every later plan built on it is
    analysed quickly even when the source came from local data (a large ``LocalRelation``
    costs each analysis in proportion to its rows). Over Connect (whose column references
    name their plan) it is persisted instead, unless the caller persisted it already.
    """
    if not is_connect(spark):
        cached = over_cache(given, spark)
        if cached is not None:
            # Cached blocks keep their partitions and their rows' order: the ids are stable.
            source = cached.withColumn(SOURCE_ID, F.monotonically_increasing_id())
            return source, cached.count(), lambda: None
        # The rows are counted by the checkpoint's own job.
        rows = Observation(f"deltalog_merge_source_{uuid.uuid4().hex}")
        source = given.withColumn(SOURCE_ID, F.monotonically_increasing_id())
        observed = source.observe(rows, F.count(F.lit(1)).alias("n"))
        checkpointed = observed.localCheckpoint(eager=True)
        return checkpointed, int(rows.get["n"]), lambda: free_local_checkpoint(checkpointed)
    source = given.withColumn(SOURCE_ID, F.monotonically_increasing_id())
    # A source the caller persisted already has fixed partitions, so its ids are stable.
    if not _is_persisted(given):
        source = source.persist()
        return source, source.count(), source.unpersist
    return source, source.count(), lambda: None


def _is_persisted(df: DataFrame) -> bool:
    try:
        level = df.storageLevel
    except Exception:  # an engine without the property: persist to be safe
        return False
    return bool(level.useMemory or level.useDisk)
