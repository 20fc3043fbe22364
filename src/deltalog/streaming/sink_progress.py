"""The Delta sink's part of a streaming query's progress, engine-free.

A micro-batch the sink commits carries ``txn(appId = the query's id, version = the batch id)``
(see :mod:`deltalog.spark.streaming.sink`), so the table's log alone says which Delta version
holds a given batch. :func:`find_batch_commits` finds those versions by reading commits back
from the latest one; :func:`with_sink_progress` writes them into a progress's JSON (the shape
Spark's ``StreamingQueryProgress.json`` has), so a ``foreachBatch``-based sink can still show
its commits in ``lastProgress`` on classic and Spark Connect sessions alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalog.log.filenames import commit_name
from deltalog.log.reader import ParsedCommit, parse_commit

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog

# Commits read back per search at most: progress is for the latest batches, which are near the
# end of the log unless other writers commit heavily to the same table.
SEARCH_LIMIT = 200
COMMITTED_VERSION = "committedVersion"


@dataclass(frozen=True, slots=True)
class SinkCommit:
    """The commit that holds one micro-batch: its version and the rows it wrote (the
    commit's ``numOutputRows`` metric, ``None`` when it has none)."""

    version: int
    num_output_rows: int | None


def sink_description(path: str) -> str:
    """The sink's description in progress reports (the reference's ``DeltaSink[<path>]``)."""
    return f"DeltaSink[{path}]"


def find_batch_commits(
    log: DeltaLog, app_id: str, batch_ids: Iterable[int], *, limit: int = SEARCH_LIMIT
) -> dict[int, SinkCommit]:
    """The commits carrying ``txn(app_id, b)`` for each wanted batch id ``b`` that has one.

    Reads commits from the latest version backwards and stops as soon as every wanted batch is
    found, or a commit of the same query records a batch older than all still wanted (the sink
    commits a query's batches in order, so nothing older holds them), or after ``limit``
    commits, or at a commit file log cleanup removed. A table that does not exist yet gives
    ``{}``.
    """
    wanted = set(batch_ids)
    found: dict[int, SinkCommit] = {}
    if not wanted or not log.table_exists():
        return found
    version = log.update().version
    for _ in range(limit):
        if version < 0 or not wanted:
            break
        name = f"{log.log_root}/{commit_name(version)}"
        try:
            data = log.store.read(name)
        except FileNotFoundError:
            break
        batch, rows = _txn_of(
            parse_commit(data, version, table=log.table_root, file=name, file_actions=False), app_id
        )
        if batch is not None:
            if batch in wanted:
                found[batch] = SinkCommit(version, rows)
                wanted.discard(batch)
            if wanted and batch < min(wanted):
                break
        version -= 1
    return found


def _txn_of(commit: ParsedCommit, app_id: str) -> tuple[int | None, int | None]:
    """The batch id a commit records for ``app_id`` (if any) and its ``numOutputRows``."""
    batch: int | None = None
    if "txn" in commit.rows.column_names:
        for txn in commit.rows.column("txn").to_pylist():
            if txn is not None and txn["appId"] == app_id:
                batch = int(txn["version"])
    info = commit.commit_info
    value = (info.operation_metrics or {}).get("numOutputRows") if info is not None else None
    return batch, None if value is None else int(value)


def with_sink_progress(
    progress: Mapping[str, Any], path: str, commits: Mapping[int, SinkCommit]
) -> dict[str, Any]:
    """A copy of a progress's JSON whose ``sink`` names the Delta sink and, when the table
    holds the progress's batch, its version (``sink.metrics.committedVersion``) and rows
    (``sink.numOutputRows``)."""
    out = dict(progress)
    sink = dict(out.get("sink") or {})
    sink["description"] = sink_description(path)
    metrics = dict(sink.get("metrics") or {})
    commit = commits.get(int(out.get("batchId", -1)))
    if commit is not None:
        metrics[COMMITTED_VERSION] = str(commit.version)
        if commit.num_output_rows is not None:
            sink["numOutputRows"] = commit.num_output_rows
    sink["metrics"] = metrics
    out["sink"] = sink
    return out
