"""The ``StreamingQuery`` a Delta sink's ``start()`` / ``toTable()`` returns: Spark's own query
whose ``lastProgress`` and ``recentProgress`` also show the Delta sink.

The sink runs as ``foreachBatch`` (see :mod:`deltalog.spark.streaming.sink`), which cannot add to
Spark's progress, and on Spark Connect it runs in another process. So the progress is
completed where it is read: the returned query is an instance of a subclass of the query's
own class (classic or Connect, same state, so ``isinstance`` and every other method are
Spark's) whose progress properties put ``DeltaSink[<path>]`` and, for each progress's
``batchId``, the Delta version that committed it (found in the sink table's log by its
``txn``) into the progress's ``sink``. The progress keeps the type PySpark returns (a
``StreamingQueryProgress`` on 4.x, a dict on 3.5). The source's start and end offsets are
Spark's own fields and pass through unchanged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from deltalog.delta_log import DeltaLog
from deltalog.streaming.sink_progress import SinkCommit, find_batch_commits, with_sink_progress

_log = logging.getLogger(__name__)
_SUBCLASSES: dict[type, type] = {}


class DeltaSinkProgress:
    """Mixed in before Spark's ``StreamingQuery`` class (see the module docstring)."""

    _deltalog_sink_path: str

    @property
    def lastProgress(self) -> Any:
        progress = super().lastProgress  # type: ignore[misc]
        if progress is None:
            return None
        return _with_sink(self, [progress])[0]

    @property
    def recentProgress(self) -> Any:
        return _with_sink(self, list(super().recentProgress))  # type: ignore[misc]


def delta_sink_query(query: Any, path: str) -> Any:
    """``query`` (a classic or Connect ``StreamingQuery``) reporting the Delta sink at
    ``path`` in its progress."""
    base = type(query)
    cls = _SUBCLASSES.get(base)
    if cls is None:
        cls = type(base.__name__, (DeltaSinkProgress, base), {"__module__": base.__module__})
        _SUBCLASSES[base] = cls
    wrapped: Any = object.__new__(cls)
    wrapped.__dict__.update(query.__dict__)
    wrapped._deltalog_sink_path = path
    return wrapped


def _with_sink(query: Any, progresses: list[Any]) -> list[Any]:
    path = query._deltalog_sink_path
    as_json = [_json_of(p) for p in progresses]
    commits: dict[int, SinkCommit] = {}
    if as_json:
        try:
            log = DeltaLog.for_table(path)
            commits = find_batch_commits(log, str(query.id), {int(j["batchId"]) for j in as_json})
        except Exception as e:  # the progress is still Spark's; only the versions are missing
            _log.warning("%s: the sink's versions are not in the progress: %s", path, e)
    return [
        _like(p, with_sink_progress(j, path, commits))
        for p, j in zip(progresses, as_json, strict=True)
    ]


def _json_of(progress: Any) -> dict[str, Any]:
    text = getattr(progress, "json", None)
    if isinstance(text, str):  # PySpark 4.x: StreamingQueryProgress.json is a property
        loaded: dict[str, Any] = json.loads(text)
        return loaded
    return dict(progress)


def _like(original: Any, value: dict[str, Any]) -> Any:
    """``value`` as the same type as ``original`` (PySpark 4's class, or a plain dict)."""
    from_json = getattr(type(original), "fromJson", None)
    if from_json is not None:
        return from_json(value)
    return value
