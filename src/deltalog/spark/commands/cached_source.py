"""A DataFrame the caller cached, as a frame over its cached relation itself (classic sessions).

Spark matches every query against its cache fragment by fragment, and a fragment holding local
data (a ``LocalRelation``) is canonicalized and compared row by row each time: a fresh frame
over a cached 200k-row ``createDataFrame`` costs ~0.1 s per plan, before any job runs. The
cached relation compares unequal to every cached plan at once, so plans built on it skip that
cost. MERGE reads its source this way on both engines (:mod:`.merge_source`,
:func:`deltalog.spark.commands.local_dml.local_merge`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from deltalog.spark.session_clone import spark_version


def over_cache(given: Any, spark: Any) -> DataFrame | None:
    """Classic sessions: ``given`` as a frame whose plan is its cached relation itself (under
    ``given``'s own aliases, with its attributes), when the caller cached or persisted the
    whole of it; else ``None``.

    The cache entry is found by the identity of the plan ``given`` was built on (no
    comparison), or else by one lookup of ``given``'s plan."""
    jdf = getattr(given, "_jdf", None)
    if jdf is None:
        return None
    try:
        execution = jdf.queryExecution()
        aliases, inner = under_aliases(execution.analyzed())
        relation = _entry_of(spark, inner)
        if relation is None:
            _, relation = under_aliases(execution.withCachedData())  # the lookup
        if relation.getClass().getSimpleName() != "InMemoryRelation":
            return None  # not cached, or only part of it
        jvm: Any = spark.sparkContext._jvm
        plan = relation.withOutput(inner.output())  # the caller's attributes
        for alias in reversed(aliases):  # and aliases, so ``s.id`` still resolves
            plan = alias.withNewChildren(jvm.PythonUtils.toSeq([plan]))
        sql = jvm.org.apache.spark.sql
        datasets = sql.classic.Dataset if spark_version(spark) >= (4, 0) else sql.Dataset
        return DataFrame(datasets.ofRows(spark._jsparkSession, plan), spark)
    except Exception:  # a plan shaped otherwise (another Spark): the caller's way
        return None


def _entry_of(spark: Any, plan: Any) -> Any | None:
    """The cached relation whose cache key is ``plan`` itself (the same JVM object: the plan
    of the frame the caller cached, under the aliases of a frame derived from it), or
    ``None``. Read from the cache manager's entries, which Spark keeps private."""
    manager = spark._jsparkSession.sharedState().cacheManager()
    if manager.isEmpty():
        return None
    field = manager.getClass().getDeclaredField("cachedData")
    field.setAccessible(True)
    entries = field.get(manager)
    same = spark.sparkContext._jvm.java.util.IdentityHashMap()  # compares by reference
    same.put(plan, True)
    for i in range(entries.size()):
        entry = entries.apply(i)
        if same.containsKey(entry.plan()):
            return entry.cachedRepresentation()
    return None


def under_aliases(plan: Any) -> tuple[list[Any], Any]:
    """The ``SubqueryAlias`` nodes on top of ``plan`` (outermost first) and what they wrap."""
    aliases = []
    while plan.getClass().getSimpleName() == "SubqueryAlias":
        aliases.append(plan)
        plan = plan.child()
    return aliases, plan
