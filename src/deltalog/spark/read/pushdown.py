"""Filters applied to a Delta read skip files by the log's statistics, as delta-spark's do.

A Delta read is Spark's own parquet scan over the snapshot's file list
(:func:`deltalog.spark.read.scan.read_snapshot`), fixed when the DataFrame is made; Spark prunes
hive partition directories and parquet row groups itself, but cannot know the per-file min/max/null
counts the log holds. delta-spark applies them in a Catalyst rule; without JVM code the filter
has to be seen when it is applied, so :func:`install` wraps ``DataFrame.filter`` (and ``where``,
its alias) on classic and Connect sessions: on a DataFrame that is a Delta read (tagged by
:func:`deltalog.spark.read.delta_read.tag`), the read is made again over the files that may
hold matching rows (:mod:`deltalog.scan.skipping`), and the filter is applied to that. The rows
are the same, because skipping only drops files that cannot match, and the filter itself still
runs on every row read.

The new read is the old one with fewer files, not merely a read of the same rows: on classic
sessions the old analysed plan gets the new file list spliced in with its own attributes, and
on Connect each plan node keeps its plan id, so columns taken from the user's read
(``df.where(...).select(df["id"])``) resolve exactly as without skipping.

Which conditions: SQL text on any session, and on classic sessions a ``Column`` too (the SQL
of the condition as Spark analysed it is what skipping reads). Filters chain:
``load().where(a).where(b)`` skips by ``a AND b``. Any other DataFrame (a projection, a join,
...) is not a Delta read, and filters on it are Spark's alone.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from deltalog.spark.patching import patch_classes, wrap
from deltalog.spark.read.delta_read import DeltaRead, plan_id, read_of, tag
from deltalog.spark.read.scan import scan_dataframe, scan_files
from deltalog.spark.session import pyspark_classes

log = logging.getLogger(__name__)


_installed = False


def install() -> None:
    """Wrap ``filter``/``where`` of the DataFrame classes (classic and Connect). Idempotent;
    called by the entry points that hand Delta reads to users."""
    global _installed
    if _installed:
        return
    _installed = True
    classic = ("pyspark.sql.classic.dataframe", "pyspark.sql.dataframe")  # 4.x, 3.5
    classes = pyspark_classes("DataFrame", classic, "pyspark.sql.connect.dataframe")
    patch_classes(classes, "_deltalog_pushdown", _patch, inherited=False)


def _patch(cls: type) -> None:
    wrap(cls, "filter", _pushing_filter)
    wrap(cls, "where", _alias)


def _alias(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def where(self: Any, condition: Any) -> Any:
        return self.filter(condition)

    return where


def _pushing_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def filter(self: Any, condition: Any) -> Any:
        read = read_of(self)
        if read is None or _is_cached(self):  # a cached read answers from its cache
            return original(self, condition)
        if isinstance(condition, str):
            text = condition
        else:
            plain = original(self, condition)
            analyzed = _analyzed_condition(plain)
            if analyzed is None:
                return plain
            text = analyzed
        texts = (*read.texts, text)
        try:
            base = _pruned_read(self, read, texts, original)
        except Exception as e:  # skipping is an optimisation: never fail on it
            log.debug("filter not pushed into the Delta read: %s", e)
            base = None
        filtered = original(self if base is None else base, condition)
        levels = read.levels
        try:
            if not levels and not hasattr(filtered, "_jdf"):  # Connect: ids to keep
                levels = ((None, plan_id(self)),)
            if levels:
                levels = (*levels, (condition, plan_id(filtered)))
        except (AttributeError, ValueError):  # plan ids it cannot keep: later filters are Spark's
            return filtered
        return tag(filtered, DeltaRead(read.snapshot, read.store, texts, levels))

    return filter


def _is_cached(df: Any) -> bool:
    try:
        return bool(df.is_cached)
    except Exception:  # Connect asks the server; no answer means no cache to keep
        return False


def _analyzed_condition(filtered: Any) -> str | None:
    """The SQL of the condition of a classic ``Column`` filter, as Spark analysed it (names
    resolved, literals coerced: ``(id < CAST(1000 AS BIGINT))``); ``None`` on Connect, whose
    plans are analysed on the server."""
    jdf = getattr(filtered, "_jdf", None)
    if jdf is None:
        return None
    try:
        plan = jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() != "Filter":
            return None
        return str(plan.condition().sql())
    except Exception:  # a plan this does not know: no skipping
        return None


def _pruned_read(
    df: Any, read: DeltaRead, texts: tuple[str, ...], apply: Callable[[Any, Any], Any]
) -> Any | None:
    """``df`` (a Delta read, maybe filtered) over only the files that may hold rows matching
    ``texts``, with the same columns, attributes and filters; ``None`` when no file is
    skipped (``df`` is as good)."""
    spark = df.sparkSession
    files = scan_files(spark, read.snapshot, " AND ".join(f"({t})" for t in texts))
    if files.num_rows == read.snapshot.num_of_files:
        return None
    if files.num_rows == 0:  # keep one file, so the plan keeps its shape; its rows are filtered
        files = read.snapshot.all_files_arrow().slice(0, 1)
    fewer = scan_dataframe(spark, read.snapshot, read.store, files)
    if hasattr(df, "_jdf"):
        return _spliced(df, fewer)
    return _connect_read(fewer, read, apply)


def _spliced(df: Any, fewer: Any) -> Any | None:
    """Classic: ``df``'s own analysed plan with its parquet relation swapped for ``fewer``'s,
    which keeps ``df``'s output attributes (their ids), so a ``Column`` of the user's read
    (``df["id"]``) still resolves on what a later filter returns."""
    old_plan = df._jdf.queryExecution().analyzed()
    old = _relation(old_plan)
    new = _relation(fewer._jdf.queryExecution().analyzed())
    if old is None or new is None:
        return None
    fields = [new.productElement(i) for i in range(new.productArity())]
    fields[1] = old.output()  # LogicalRelation(relation, output, ...): the old attributes
    relation = new.copy(*fields)
    jvm = df.sparkSession._jvm

    def swap(plan: Any) -> Any:
        if plan.equals(old):
            return relation
        children = plan.children()
        if children.size() == 0:
            return plan
        kids = [swap(children.apply(i)) for i in range(children.size())]
        return plan.withNewChildren(jvm.PythonUtils.toSeq(kids))

    try:
        datasets = jvm.org.apache.spark.sql.classic.Dataset  # PySpark 4.x
        jdf = datasets.ofRows(df.sparkSession._jsparkSession, swap(old_plan))
    except Exception:  # PySpark 3.5: Dataset is not yet in ``classic``
        datasets = jvm.org.apache.spark.sql.Dataset
        jdf = datasets.ofRows(df.sparkSession._jsparkSession, swap(old_plan))
    return type(df)(jdf, df.sparkSession)


def _relation(plan: Any) -> Any | None:
    """The one parquet ``LogicalRelation`` of a Delta read's plan."""
    if plan.getClass().getSimpleName() == "LogicalRelation":
        return plan
    children = plan.children()
    for i in range(children.size()):
        found = _relation(children.apply(i))
        if found is not None:
            return found
    return None


def _connect_read(fewer: Any, read: DeltaRead, apply: Callable[[Any, Any], Any]) -> Any:
    """Connect: ``fewer`` with the filters of ``read`` applied again, each level given the
    plan id it had, so a column of the user's read (``df["id"]``, resolved by plan id on the
    server) still resolves, as on the read it replaces."""
    levels = read.levels or ((None, plan_id(fewer)),)
    df = fewer
    for condition, level_id in levels:
        if condition is not None:
            df = apply(df, condition)
        df._plan._root_plan_id = level_id
    return df
