"""Filters applied to a Delta read skip files by the log's statistics, as delta-spark's do.

A Delta read is Spark's own parquet scan over the snapshot's file list
(:func:`deltalog.spark.read.scan.read_snapshot`), fixed when the DataFrame is made; Spark prunes
hive partition directories and parquet row groups itself, but cannot know the per-file min/max/null
counts the log holds. delta-spark applies them in a Catalyst rule; without JVM code the filter
has to be seen when it is applied, so :func:`install` wraps ``DataFrame.filter`` (and ``where``,
its alias) on classic and Connect sessions: on a DataFrame that is a Delta read (tagged by
:func:`tag`), the read is made again over the files that may hold matching rows
(:mod:`deltalog.scan.skipping`), and the filter is applied to that. The rows are the same,
because skipping only drops files that cannot match, and the filter itself still runs on every
row read.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltalog.snapshot import Snapshot
    from deltalog.storage.base import LogStore

log = logging.getLogger(__name__)

_TAG = "_deltalog_read"


@dataclass(frozen=True, slots=True)
class DeltaRead:
    """What a DataFrame tagged as a Delta read was made from.

    Attributes:
        snapshot: the snapshot it reads.
        store: the table's log store.
        texts: the SQL of the filters already applied, which skipping reads.
        levels: on Connect, the plan id of the read and of each filter on it, with the filter
            (how the read is made again: see :func:`_connect_read`).
    """

    snapshot: Snapshot
    store: LogStore
    texts: tuple[str, ...] = ()
    levels: tuple[tuple[Any, int], ...] = ()


def tag_filtered(base: Any, where: str, read: DeltaRead) -> Any:
    """``base`` (the read of ``read``'s snapshot over the files ``where`` may match) filtered
    by ``where``, tagged as a read already filtered by it."""
    filtered = base.where(where)
    levels: tuple[tuple[Any, int], ...] = ()
    if not hasattr(filtered, "_jdf"):  # Connect
        try:
            levels = ((None, _plan_id(base)), (where, _plan_id(filtered)))
        except (AttributeError, ValueError):  # plan ids it cannot keep: no pushdown later
            return filtered
    return tag(filtered, DeltaRead(read.snapshot, read.store, (where,), levels))


def tag(df: Any, read: DeltaRead) -> Any:
    """Mark ``df`` as the rows of ``read`` (so a later filter may skip files); returns it.
    The first tag installs the filter wrapper (:func:`install`)."""
    if not _installed:
        install()
    df.__dict__[_TAG] = read
    return df


_installed = False


def install() -> None:
    """Wrap ``filter``/``where`` of the DataFrame classes (classic and Connect). Idempotent."""
    global _installed
    _installed = True
    for cls in _dataframe_classes():
        if cls.__dict__.get("_deltalog_pushdown"):
            continue
        setattr(cls, "filter", _pushing_filter(getattr(cls, "filter")))  # noqa: B009, B010
        setattr(cls, "where", _alias(getattr(cls, "where")))  # noqa: B009, B010
        setattr(cls, "_deltalog_pushdown", True)  # noqa: B010


def _dataframe_classes() -> list[type]:
    from deltalog.spark.session import pyspark_classes

    classic = ("pyspark.sql.classic.dataframe", "pyspark.sql.dataframe")  # 4.x, 3.5
    return pyspark_classes("DataFrame", classic, "pyspark.sql.connect.dataframe")


def _alias(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def where(self: Any, condition: Any) -> Any:
        return self.filter(condition)

    return where


def _pushing_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def filter(self: Any, condition: Any) -> Any:
        read = self.__dict__.get(_TAG)
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
                levels = ((None, _plan_id(self)),)
            if levels:
                levels = (*levels, (condition, _plan_id(filtered)))
        except (AttributeError, ValueError):  # plan ids it cannot keep: later filters are Spark's
            return filtered
        return tag(filtered, DeltaRead(read.snapshot, read.store, texts, levels))

    return filter


def _is_cached(df: Any) -> bool:
    try:
        return bool(df.is_cached)
    except Exception:  # Connect asks the server; no answer means no cache to keep
        return False


def is_plain(text: str) -> bool:
    """Whether ``text`` is wholly comparisons of columns with literals (no functions)."""
    from deltalog.scan.predicate import PredicateSyntaxError, has_opaque, parse_predicate

    try:
        return not has_opaque(parse_predicate(text))
    except PredicateSyntaxError:
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
    from deltalog.spark.read.scan import scan_dataframe, scan_files

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
    levels = read.levels or ((None, _plan_id(fewer)),)
    df = fewer
    for condition, plan_id in levels:
        if condition is not None:
            df = apply(df, condition)
        df._plan._root_plan_id = plan_id
    return df


def _plan_id(df: Any) -> int:
    plan = df._plan
    if getattr(plan, "_plan_id_with_rel", None) is not None:
        raise ValueError("a plan with relations keeps its own ids")
    return int(plan._root_plan_id)
