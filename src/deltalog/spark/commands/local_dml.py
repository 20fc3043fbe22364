"""DELETE, UPDATE and MERGE of few bytes on this process (Arrow), for the Spark commands
(:mod:`deltalog.spark.commands.dml`, :mod:`deltalog.spark.commands.merge`): the core's
:mod:`deltalog.commands.dml.arrow` and :mod:`~deltalog.commands.dml.merge_arrow` in the
command's own transaction, so both engines share the read set, the writers, the metrics, the
operation and the commit.

A command goes local only when all of these hold, and otherwise runs on Spark unchanged:

* :func:`deltalog.spark.engine.choose_engine` says so (the candidate files' bytes after pruning
  against ``spark.deltalog.local.maxBytes``, or ``spark.deltalog.engine``);
* the condition is SQL text that Spark has already analysed against the table (its errors are
  Spark's) and that parses wholly into the evaluated subset (:mod:`deltalog.scan.predicate`:
  comparisons, IN, IS NULL, BETWEEN, AND/OR/NOT, integral and floating arithmetic with a
  literal); a ``Column`` condition stays on Spark (its text differs between Spark versions);
* every UPDATE value is SQL text in :mod:`deltalog.commands.dml.values`' subset;
* column names resolve case-insensitively (``spark.sql.caseSensitive`` off), as the local
  evaluator resolves them; literals without a zone are read in the session's time zone;
* a MERGE joins on equal keys of the same name (``t.k = s.k``) with unconditional
  ``UPDATE *``, ``DELETE`` and ``INSERT *`` clauses, its source's columns are of the target's
  types, and the source is small by its plan statistics (classic sessions): it is collected
  once, as Arrow (local data without a job: :mod:`.local_relation`).

What the local evaluator cannot decide exactly on the rows it meets (an overflow, a remainder
by zero, a cast it does not reproduce) it refuses: the files it wrote are deleted and the
command runs on Spark, whose answer or error the user then gets. Nothing is committed before.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import Action
from deltalog.commands.dml.job import DmlJob
from deltalog.commands.dml.merge_arrow import merge_rows, target_columns
from deltalog.commands.dml.values import SqlValue
from deltalog.scan.predicate import Predicate, has_opaque
from deltalog.schema import StructType, compares_by_bytes
from deltalog.spark.commands.cached_source import over_cache
from deltalog.spark.commands.local_relation import local_relation, relation_to_arrow
from deltalog.spark.engine import choose_engine, local_max_bytes
from deltalog.spark.schema import from_spark_schema
from deltalog.spark.session import conf_get, session_time_zone, to_arrow

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.txn import operations
    from deltalog.txn.transaction import Transaction

T = TypeVar("T")

_log = logging.getLogger("deltalog.spark.engine")


def local_job(
    spark: Any,
    txn: Transaction,
    operation: operations.Operation,
    command: str,
    condition: Any,
    predicate: Predicate | None,
    files: pa.Table,
) -> DmlJob | None:
    """A job on this process for ``command``, or ``None`` when it runs on Spark."""
    if condition is not None and (
        not isinstance(condition, str) or predicate is None or has_opaque(predicate)
    ):
        return None
    if conf_get(spark, "spark.sql.caseSensitive", "false").strip().lower() == "true":
        return None
    snapshot = txn.snapshot
    assert snapshot is not None
    size = int(pc.sum(files.column("size")).as_py() or 0) if files.num_rows else 0
    if not choose_engine(spark, snapshot, size, command).local:
        return None
    job = DmlJob(txn, operation, zone=session_time_zone(spark))
    if predicate is not None:
        try:  # no file is read for a refusal
            job.check_condition(predicate)
        except (errors.UnsupportedFeatureError, errors.InvalidArgumentError) as e:
            _log.info("%s of %s: on Spark after all (%s)", command, job.root, _first_line(e))
            return None
    return job


def sql_values(assignments: Mapping[str, Any], table: str) -> dict[str, SqlValue] | None:
    """UPDATE's values parsed for the local evaluator, or ``None`` when one is not SQL text in
    its subset."""
    out = {}
    for name, value in assignments.items():
        if not isinstance(value, str):
            return None
        try:
            out[name] = SqlValue.parse(value, table)
        except errors.UnsupportedFeatureError:
            return None
    return out


def run_local(job: DmlJob, command: str, work: Callable[[DmlJob], T]) -> T | None:
    """``work(job)``, or ``None`` when the local evaluator refused part of it (the files it
    wrote are deleted; the caller runs the command on Spark)."""
    try:
        with job:
            return work(job)
    except (errors.UnsupportedFeatureError, errors.InvalidArgumentError) as e:
        # Spark decides what the local evaluator does not reproduce (and raises its own errors).
        _log.info("%s of %s: on Spark after all (%s)", command, job.root, _first_line(e))
        return None


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0]


# -- MERGE -----------------------------------------------------------------------------------------

_KEY_TYPES = (
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_date,
    pa.types.is_timestamp,
    pa.types.is_boolean,
    pa.types.is_decimal,
)
_CONJUNCTS = re.compile(r"\s+AND\s+", re.IGNORECASE)
_NAME = r"(?:`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)"
_EQUALITY = re.compile(rf"^\(?\s*({_NAME})\.({_NAME})\s*=\s*({_NAME})\.({_NAME})\s*\)?$")


@dataclass(frozen=True, slots=True)
class MergeShape:
    """A MERGE the core's equality-key merge runs (:func:`merge_rows`): keys of the same name
    on both sides and unconditional ``UPDATE *`` / ``DELETE`` / ``INSERT *`` clauses."""

    keys: tuple[str, ...]
    matched: str | None
    not_matched: str | None
    by_source: str | None

    def run(self, job: DmlJob, source: pa.Table) -> tuple[list[Action], dict[str, int]]:
        return merge_rows(job, source, self.keys, self.matched, self.not_matched, self.by_source)


def merge_shape(
    condition: Any, clauses: Sequence[Any], alias: str | None, snapshot: Snapshot, source: Any
) -> MergeShape | None:
    """The MERGE as the core's merge takes it, or ``None`` when it needs Spark: a condition
    other than ``t.k = s.k [AND ...]`` (SQL text, the target's alias), a clause with a
    condition or explicit assignments, a source column missing for ``*`` or of another type
    than its target column (Spark would cast it), float keys (Spark's joins normalize NaN and
    -0.0)."""
    actions: dict[str, str] = {}
    for clause in clauses:
        if clause.condition is not None or clause.kind in actions:
            return None
        if clause.action in ("update", "insert") and clause.assignments is not None:
            return None
        if clause.kind == "notMatchedBySource" and clause.action != "delete":
            return None
        actions[clause.kind] = clause.action
    keys = _equality_keys(condition, alias, snapshot)
    if keys is None:
        return None
    target = snapshot.schema.to_arrow()
    try:
        given = from_spark_schema(source.schema).to_arrow()
    except Exception:  # a type without an Arrow twin
        return None
    by_lower: dict[str, pa.Field] = {}
    for f in given:
        if f.name.lower() in by_lower:
            return None  # Spark resolves duplicates its own way (or refuses)
        by_lower[f.name.lower()] = f
    writes = "update" in actions.values() or "insert" in actions.values()
    for f in target:
        wanted = writes or f.name in keys
        got = by_lower.get(f.name.lower())
        if wanted and (got is None or got.type != f.type):
            return None
        if f.name in keys and not any(test(f.type) for test in _KEY_TYPES):
            return None
    return MergeShape(
        keys,
        actions.get("matched"),
        actions.get("notMatched"),
        actions.get("notMatchedBySource"),
    )


def _equality_keys(condition: Any, alias: str | None, snapshot: Snapshot) -> tuple[str, ...] | None:
    """The key columns of ``alias.k = other.k AND ...`` (table spelling), or ``None``."""
    if not isinstance(condition, str) or not alias:
        return None
    names = {n.lower(): n for n in snapshot.schema.names}
    structs = {f.name.lower() for f in snapshot.schema.fields if isinstance(f.type, StructType)}
    target = alias.lower()
    keys: list[str] = []
    for part in _CONJUNCTS.split(condition.strip()):
        m = _EQUALITY.match(part.strip())
        if m is None:
            return None
        left, left_col, right, right_col = (g.strip("`").lower() for g in m.groups())
        if left == target and right != target:
            column, other = left_col, right_col
        elif right == target and left != target:
            column, other = right_col, left_col
        else:
            return None
        # The other side must be the source's column of the same name, not a field of a target
        # struct column named like the source's alias.
        if column != other or {left, right} & structs:
            return None
        if column not in names or not compares_by_bytes(snapshot.schema.field(column)):
            return None  # a collated key: Spark matches it by its collation, Arrow by bytes
        keys.append(names[column])
    return tuple(keys) if keys else None


def local_merge(
    spark: Any,
    txn: Transaction,
    operation: operations.Operation,
    shape: MergeShape,
    source: Any,
) -> tuple[list[Action], dict[str, int]] | None:
    """The MERGE on this process, or ``None`` when it runs on Spark: a classic session, and a
    source and table small by the engine's gate (the source's bytes count with the table's).

    The source's plan statistics give its size where Spark knows it (a cached or local
    source, files); where it does not (a frame over an RDD), at most as many rows as could fit
    the gate are collected, and a source with more goes to Spark."""
    snapshot = txn.snapshot
    assert snapshot is not None
    if getattr(source, "_jdf", None) is None:
        return None  # Spark Connect: the source's size is unknown without running it
    # Local data is converted on the driver without a job; else a cached source is collected
    # from its cache without a cache lookup of its plan.
    relation = local_relation(source)
    if relation is None:
        source = over_cache(source, spark) or source
    jdf = source._jdf
    try:
        # The analysed plan's estimate (at least the optimised one's: no column pruned): the
        # optimised plan would look the source up in the cache first, and the collect below
        # plans its own query again (a cached 200k-row local source: ~0.09 s a lookup).
        estimate = int(str(jdf.queryExecution().analyzed().stats().sizeInBytes()))
    except Exception:
        return None
    files = snapshot.all_files_arrow()
    table_bytes = int(pc.sum(files.column("size")).as_py() or 0) if files.num_rows else 0
    known = estimate < _UNKNOWN_SIZE
    if not choose_engine(spark, snapshot, table_bytes + (estimate if known else 0), "MERGE").local:
        return None
    if not known:
        budget = local_max_bytes(spark, snapshot) - table_bytes
        cap = max(0, budget) // (16 * max(1, len(source.columns)))
        rows = to_arrow(source.limit(cap + 1))
        if rows.num_rows > cap or rows.nbytes > budget:
            _log.info("MERGE of %s: on Spark after all (the source is large)", snapshot.table_root)
            return None
        job = DmlJob(txn, operation, zone=session_time_zone(spark))
        return run_local(job, "MERGE", lambda job: shape.run(job, rows))
    job = DmlJob(txn, operation, zone=session_time_zone(spark))
    # The target's files are read while Spark collects the source (its keys, not known yet,
    # may skip some: those reads are dropped).
    with job.prefetching(files, target_columns(job, shape.keys)):
        rows = relation_to_arrow(spark, relation) if relation is not None else None
        if rows is None:
            rows = to_arrow(source)
        return run_local(job, "MERGE", lambda job: shape.run(job, rows))


# Spark's estimate of a plan it knows nothing about is Long.MaxValue (and sums of it more).
_UNKNOWN_SIZE = 1 << 62
