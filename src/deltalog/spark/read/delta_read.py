"""A DataFrame that is a Delta read: marked with what it was made from, so that a filter applied
to it later can skip files by the log's statistics.

:func:`~deltalog.spark.read.scan.read_snapshot` tags what it returns; the ``DataFrame.filter``
wrapper of :mod:`deltalog.spark.read.pushdown` (installed by the entry points that hand
Delta reads to users: ``DeltaTable``, ``read_table`` and the ``format("delta")`` bridge) reads the
tag and makes the read again over fewer files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

TAG = "_deltalog_read"


@dataclass(frozen=True, slots=True)
class DeltaRead:
    """What a DataFrame tagged as a Delta read was made from.

    Attributes:
        snapshot: the snapshot it reads.
        store: the table's log store.
        texts: the SQL of the filters already applied, which skipping reads.
        levels: on Connect, the plan id of the read and of each filter on it, with the filter
            (how the read is made again: see :mod:`deltalog.spark.read.pushdown`).
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
            levels = ((None, plan_id(base)), (where, plan_id(filtered)))
        except (AttributeError, ValueError):  # plan ids it cannot keep: no pushdown later
            return filtered
    return tag(filtered, DeltaRead(read.snapshot, read.store, (where,), levels))


def tag(df: Any, read: DeltaRead) -> Any:
    """Mark ``df`` as the rows of ``read`` (so a later filter may skip files); returns it."""
    df.__dict__[TAG] = read
    return df


def read_of(df: Any) -> DeltaRead | None:
    """What ``df`` was read from, when it is a (maybe filtered) Delta read."""
    read: DeltaRead | None = df.__dict__.get(TAG)
    return read


def plan_id(df: Any) -> int:
    """The root plan id of a Connect DataFrame.

    Raises:
        ValueError: a plan with relations (it keeps ids of its own).
    """
    plan = df._plan
    if getattr(plan, "_plan_id_with_rel", None) is not None:
        raise ValueError("a plan with relations keeps its own ids")
    return int(plan._root_plan_id)
