"""The streaming source's fast path for plain appends: the added files of a block of commits
selected together.

A stream that catches up reads commits in blocks (``PREFETCH_COMMITS``), whose lines Arrow's
JSON reader decodes in one pass. Going on commit by commit from there (a
:class:`~deltalog.log.reader.ParsedCommit` of each, then its ``dataChange`` adds) costs a dozen
Arrow calls on tiny arrays per commit, ~0.2 ms: 40 ms of the first ``latestOffset`` of a query
over 200 commits, paid in the planner process Spark starts with each query. Here the adds of
every *plain* commit of the block are selected with one call per column over the block, and
each commit gets a slice.

A commit is plain when its lines are ``add`` and ``remove`` actions, no ``remove`` with
``dataChange`` (those go through :meth:`SourcePlanner._data_changes`'s checks), and at most
``commitInfo`` besides (no ``metaData`` to check the schema of, no ``protocol``, ``txn``,
``cdc`` or other line). Every other commit is left to the commit-by-commit path, which gives a
plain commit the same files (``tests/unit/streaming/test_commit_block.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.actions import action_from_dict
from deltalog.log import kernels as k
from deltalog.log.commit_arrow import read_commits_block
from deltalog.log.reader import decode_line

# The columns of an added file the stream reads it by.
FILE_COLUMNS = ("path", "partitionValues", "deletionVector", "size")


def plain_commit_files(
    commits: Sequence[tuple[bytes, int, str]], *, table: str
) -> dict[int, pa.Table]:
    """The ``dataChange`` adds (``FILE_COLUMNS`` plus ``index``, the action's position among
    the commit's actions) of each plain commit of ``commits`` (``(data, version, file)``), by
    version; commits not named are for the commit-by-commit path (all of them when one file of
    the block is not in the clean shape Arrow's reader takes)."""
    if not commits:
        return {}
    block = read_commits_block([data for data, _, _ in commits], table=table)
    if block is None:
        return {}
    whole, lengths = block
    counts = np.asarray(lengths, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    owner = np.repeat(np.arange(len(commits)), counts)  # each line's commit
    files = whole.add_valid | whole.remove_valid
    plain = np.ones(len(commits), dtype=bool)
    for row in np.flatnonzero(~files):
        c = int(owner[row])
        if plain[c]:
            lineno = int(row - starts[c]) + 1
            plain[c] = _is_commit_info(whole.lines[row], table, commits[c][2], lineno)
    plain[owner[whole.remove_valid & _data_change(whole.remove)]] = False
    # A plain commit's rows are its file actions (commitInfo is not one): an action's index
    # is its rank among them.
    rank = np.cumsum(files) - 1
    before = rank[starts] + 1 - files[starts]  # file actions of the commits before
    index = rank - before[owner]
    keep = whole.add_valid & _data_change(whole.add) & plain[owner]
    columns = [k.struct_field(whole.add, name) for name in FILE_COLUMNS]
    columns.append(k.int64s(index))
    kept = k.filter_rows(
        pa.Table.from_arrays(columns, names=[*FILE_COLUMNS, "index"]), k.booleans(keep)
    )
    per_commit = np.bincount(owner[keep], minlength=len(commits))
    offsets = np.concatenate(([0], np.cumsum(per_commit)))
    return {
        commits[int(c)][1]: kept.slice(int(offsets[c]), int(per_commit[c]))
        for c in np.flatnonzero(plain)
    }


def _is_commit_info(line: bytes, table: str, file: str, lineno: int) -> bool:
    """Whether the line is a ``commitInfo`` the commit-by-commit path takes as it is (any
    doubt is left to that path, which decides every error)."""
    try:
        key, value = decode_line(line, table=table, file=file, lineno=lineno)
        if key != "commitInfo":
            return False
        action_from_dict(key, value)
    except (errors.DeltaError, ValueError, TypeError):
        return False
    return True


def _data_change(column: pa.Array) -> np.ndarray:
    """Rows holding this kind of action with ``dataChange=true`` (a null flag is false)."""
    # struct_field carries the action's nulls, and to_numpy_bool reads nulls as false.
    return k.to_numpy_bool(k.struct_field(column, "dataChange"))
