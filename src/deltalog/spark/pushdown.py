"""Filters applied to a Delta read skip files by the log's statistics, as delta-spark's do.

A Delta read is Spark's own parquet scan over the snapshot's file list
(:func:`deltalog.spark.scan.read_snapshot`), fixed when the DataFrame is made; Spark prunes hive
partition directories and parquet row groups itself, but cannot know the per-file min/max/null
counts the log holds. delta-spark applies them in a Catalyst rule; without JVM code the filter
has to be seen when it is applied, so :func:`install` wraps ``DataFrame.filter`` (and ``where``,
its alias) on classic and Connect sessions: on a DataFrame that is a Delta read (tagged by
:func:`tag`), the read is made again over the files that may hold matching rows
(:mod:`deltalog.data_skipping`), and the filter is applied to that. The rows are the same,
because skipping only drops files that cannot match, and the filter itself still runs on every
row read.

Which conditions: SQL text on any session, and on classic sessions a ``Column`` too (the SQL
of the condition as Spark analysed it is what skipping reads; the ``Column`` itself is what
filters). A ``Column`` that does not resolve against the new read (it names the old one's
attributes) falls back to the old read, unpruned. Filters chain: ``load().where(a).where(b)``
skips by ``a AND b``. Any other DataFrame (a projection, a join, ...) is not a Delta read, and
filters on it are Spark's alone.
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
        conditions: the filters already applied, in order (SQL text or ``Column``).
        texts: their SQL text, which skipping reads.
    """

    snapshot: Snapshot
    store: LogStore
    conditions: tuple[Any, ...] = ()
    texts: tuple[str, ...] = ()


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
    classes: list[type] = []
    try:
        from pyspark.sql.classic.dataframe import DataFrame as Classic  # PySpark 4.x

        classes.append(Classic)
    except ImportError:
        from pyspark.sql.dataframe import DataFrame as Classic35  # PySpark 3.5

        classes.append(Classic35)
    try:
        from pyspark.sql.connect.dataframe import DataFrame as Connect
    except Exception:  # Connect's client dependencies are optional
        return classes
    classes.append(Connect)
    return classes


def _alias(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def where(self: Any, condition: Any) -> Any:
        return self.filter(condition)

    return where


def _pushing_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def filter(self: Any, condition: Any) -> Any:
        read = self.__dict__.get(_TAG)
        if read is None:
            return original(self, condition)
        plain = None
        if isinstance(condition, str):
            text = condition
        else:
            plain = original(self, condition)
            analyzed = _analyzed_condition(plain)
            if analyzed is None:
                return plain
            text = analyzed
        # A Column whose analysed SQL is a plain comparison filters the new read by that SQL:
        # it may name the old read's attributes, which the new one does not have.
        reapplied = text if plain is not None and _is_plain(text) else condition
        pushed = DeltaRead(
            read.snapshot, read.store, (*read.conditions, reapplied), (*read.texts, text)
        )
        try:
            rebuilt = _pruned_read(self.sparkSession, pushed, original)
        except Exception as e:  # a condition that does not resolve on the new read
            log.debug("filter not pushed into the Delta read: %s", e)
            rebuilt = None
        if rebuilt is None:
            rebuilt = plain if plain is not None else original(self, condition)
        return tag(rebuilt, pushed)

    return filter


def _is_plain(text: str) -> bool:
    """Whether ``text`` is wholly comparisons of columns with literals (no functions)."""
    from deltalog.predicate import PredicateSyntaxError, has_opaque, parse_predicate

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


def _pruned_read(spark: Any, read: DeltaRead, apply: Callable[[Any, Any], Any]) -> Any | None:
    """The read of the files that may match every condition of ``read``, with the conditions
    applied; ``None`` when no file is skipped (the plain filter is as good)."""
    from deltalog.spark.scan import scan_dataframe, scan_files

    where = " AND ".join(f"({t})" for t in read.texts)
    files = scan_files(spark, read.snapshot, where)
    if files.num_rows == read.snapshot.num_of_files:
        return None
    df = scan_dataframe(spark, read.snapshot, read.store, files)
    for condition in read.conditions:
        df = apply(df, condition)
    return df
