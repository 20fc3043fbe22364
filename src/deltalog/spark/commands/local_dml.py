"""DELETE and UPDATE of few bytes on this process (Arrow), for the Spark commands
(:mod:`deltalog.spark.commands.dml`): the core's :mod:`deltalog.commands.dml.arrow` in the
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
  evaluator resolves them; literals without a zone are read in the session's time zone.

What the local evaluator cannot decide exactly on the rows it meets (an overflow, a remainder
by zero, a cast it does not reproduce) it refuses: the files it wrote are deleted and the
command runs on Spark, whose answer or error the user then gets. Nothing is committed before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.commands.dml.job import DmlJob
from deltalog.commands.dml.values import SqlValue
from deltalog.scan.predicate import Predicate, has_opaque
from deltalog.spark.engine import choose_engine
from deltalog.spark.session import conf_get, session_time_zone

if TYPE_CHECKING:
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
        try:  # literals and types are judged on no rows: no file is read for a refusal
            job.evaluate(predicate, job.empty_rows())
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
