"""Reading commits and checkpoints into Arrow rows in the log layout (driver side).

Commits are newline-delimited JSON, one action per line; checkpoints are parquet (classic,
multi-part) or V2 (a JSON or parquet top-level file whose ``sidecar`` rows name parquet files of
file actions). Everything comes out as :data:`~deltalog.actions.REPLAY_SCHEMA` rows, the shape
:class:`~deltalog.log.replay.InMemoryLogReplay` consumes; ``commitInfo`` and ``cdc`` are returned
beside them.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.actions import (
    REPLAY_ACTION_KEYS,
    REPLAY_SCHEMA,
    AddCDCFile,
    CommitInfo,
    Sidecar,
    action_from_dict,
)
from deltalog.fields import conform_table
from deltalog.log import kernels as k
from deltalog.log.checkpoint_columns import open_parquet, projected_leaves
from deltalog.log.commit_arrow import ArrowCommit, read_commit_arrow, read_commits_arrow
from deltalog.log.filenames import SIDECAR_DIR
from deltalog.paths import resolve

if TYPE_CHECKING:
    from deltalog.log.filenames import LogFile
    from deltalog.log.segment import Checkpoint
    from deltalog.storage.base import LogStore


# Lines that are file actions, recognised without parsing them.
_FILE_ACTION_LINE = re.compile(rb'^\s*\{\s*"(add|remove|cdc)"')


@dataclass(slots=True)
class ParsedCommit:
    """One commit file, split for its users.

    Attributes:
        version: the commit's version.
        rows: replay-relevant actions in file order (:data:`REPLAY_SCHEMA`).
        commit_info: the commit's ``commitInfo``, if it has one.
        cdc: the commit's ``cdc`` actions.
    """

    version: int
    rows: pa.Table
    commit_info: CommitInfo | None = None
    cdc: list[AddCDCFile] = field(default_factory=list)


def parse_commit(
    data: bytes, version: int, *, table: str, file: str, file_actions: bool = True
) -> ParsedCommit:
    """Parse the bytes of a commit file.

    With ``file_actions=False`` the ``add``/``remove``/``cdc`` lines are skipped unparsed (the
    Spark engine reads them on executors); the last line is still parsed in full, because a
    truncated write damages the end of a file and Spark's JSON reader ignores trailing garbage
    after a complete object.

    A file in the common clean shape is decoded by Arrow's JSON reader
    (:mod:`deltalog.log.commit_arrow`); any other is decoded line by line in Python, which is
    also what decides every error. Both give the same rows.

    Raises:
        InvalidTableError: a line is not a JSON object with one action (e.g. a truncated last line).
    """
    if file_actions:
        parsed = _parse_with_arrow(data, version, table=table, file=file)
        if parsed is not None:
            return parsed
    return _parse_with_python(data, version, table=table, file=file, file_actions=file_actions)


def parse_commits(
    commits: Sequence[tuple[bytes, int, str]], *, table: str, file_actions: bool = True
) -> list[ParsedCommit]:
    """:func:`parse_commit` of each ``(data, version, file)``, with one pass of Arrow's JSON
    reader over all of them when they are all in the clean shape (else one by one)."""
    if file_actions and len(commits) > 1:
        arrows = read_commits_arrow([data for data, _, _ in commits], table=table)
        if arrows is not None:
            out = []
            for arrow, (data, version, file) in zip(arrows, commits, strict=True):
                parsed = _from_arrow(arrow, version, table=table, file=file)
                if parsed is None:
                    parsed = _parse_with_python(
                        data, version, table=table, file=file, file_actions=True
                    )
                out.append(parsed)
            return out
    return [
        parse_commit(data, version, table=table, file=file, file_actions=file_actions)
        for data, version, file in commits
    ]


def _parse_with_arrow(data: bytes, version: int, *, table: str, file: str) -> ParsedCommit | None:
    """The fast path of :func:`parse_commit`; ``None`` hands the file to the Python path."""
    arrow = read_commit_arrow(data, table=table)
    if arrow is None:
        return None
    return _from_arrow(arrow, version, table=table, file=file)


def _from_arrow(arrow: ArrowCommit, version: int, *, table: str, file: str) -> ParsedCommit | None:
    """A commit's rows from its Arrow-read lines; ``None`` hands it to the Python path."""
    keep = arrow.add_valid | arrow.remove_valid
    non_file: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    commit_info: CommitInfo | None = None
    cdc: list[AddCDCFile] = []
    try:
        for row in np.flatnonzero(~keep):
            line = arrow.lines[row]
            key, value = decode_line(line, table=table, file=file, lineno=int(row) + 1)
            if key in REPLAY_SCHEMA.names:
                keep[row] = True
                non_file.setdefault(key, []).append((int(row), value))
            elif key in ("commitInfo", "cdc"):
                action = action_from_dict(key, value)
                if isinstance(action, CommitInfo):
                    commit_info = action
                elif isinstance(action, AddCDCFile):
                    cdc.append(action)
        n = int(np.count_nonzero(keep))
        position = np.cumsum(keep) - 1  # a kept line's row in the output
        columns = []
        for f in REPLAY_SCHEMA:
            if f.name in ("add", "remove"):
                whole = arrow.add if f.name == "add" else arrow.remove
                columns.append(k.select_rows(pa.Table.from_arrays([whole], [f.name]), keep)[0])
            elif f.name in non_file:
                entries = non_file[f.name]
                compact = k.from_values([v for _, v in entries], f.type)
                at = np.full(n, -1, dtype=np.int64)
                at[position[[r for r, _ in entries]]] = np.arange(len(entries))
                columns.append(k.take(compact, k.optional_int64s(at, at >= 0)))
            else:
                columns.append(pa.nulls(n, f.type))
    except (errors.DeltaError, ValueError, TypeError, pa.ArrowException):
        return None  # the Python path refuses (or accepts) it exactly
    rows = pa.Table.from_arrays(columns, schema=REPLAY_SCHEMA)
    return ParsedCommit(version, rows, commit_info, cdc)


def _parse_with_python(
    data: bytes, version: int, *, table: str, file: str, file_actions: bool
) -> ParsedCommit:
    rows: list[dict[str, Any]] = []
    commit_info: CommitInfo | None = None
    cdc: list[AddCDCFile] = []
    lines = data.split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip() or (
            not file_actions and index != last and _FILE_ACTION_LINE.match(line)
        ):
            continue
        key, value = decode_line(line, table=table, file=file, lineno=index + 1)
        if key in REPLAY_SCHEMA.names:
            if file_actions or key not in ("add", "remove"):
                rows.append({key: value})
        elif key in ("commitInfo", "cdc"):
            try:
                action = action_from_dict(key, value)
            except (ValueError, TypeError) as e:
                raise errors.corrupt_commit(table, file, index + 1, str(e)) from None
            if isinstance(action, CommitInfo):
                commit_info = action
            elif isinstance(action, AddCDCFile) and file_actions:
                cdc.append(action)
        # Unknown action types, and checkpoint-only actions in a commit, are ignored.
    try:
        arrow_rows = pa.Table.from_pylist(rows, schema=REPLAY_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise errors.corrupt_commit(table, file, 0, f"a field has the wrong type ({e})") from None
    return ParsedCommit(version, arrow_rows, commit_info, cdc)


def read_commit_info(store: LogStore, log_file: LogFile, *, table: str) -> CommitInfo | None:
    """Only the ``commitInfo`` of a commit (cheap: stops at the first commitInfo line)."""
    data = store.read(log_file.path)
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if b'"commitInfo"' not in line:
            continue
        key, value = decode_line(line, table=table, file=log_file.path, lineno=lineno)
        if key == "commitInfo":
            action = action_from_dict(key, value)
            return action if isinstance(action, CommitInfo) else None
    return None


def read_checkpoint(
    store: LogStore,
    checkpoint: Checkpoint,
    *,
    table: str,
    keys: tuple[str, ...] = REPLAY_ACTION_KEYS,
) -> pa.Table:
    """All rows of a checkpoint in the replay layout, restricted to the action columns ``keys``.

    V2 checkpoints are followed into their sidecars when file actions are requested.

    Raises:
        InvalidTableError: a checkpoint file or sidecar is missing or unreadable.
    """
    schema = pa.schema([REPLAY_SCHEMA.field(k) for k in keys])
    tables: list[pa.Table] = []
    sidecars: list[Sidecar] = []
    parquet = [f.path for f in checkpoint.files if not f.name.endswith(".json")]
    for f in checkpoint.files:
        if f.name.endswith(".json"):
            data = store.read(f.path)
            top = parse_commit(data, checkpoint.version, table=table, file=f.path)
            tables.append(top.rows.select(list(keys)))
            sidecars += sidecars_in_json(data)
    for part in _read_parquet_files(store, parquet, (*keys, "sidecar"), table=table):
        if "sidecar" in part.column_names:
            sidecars += sidecars_in_table(part)
        tables.append(conform_table(part, schema))
    # A classic-named parquet file may also be a V2 checkpoint: its sidecar rows say so.
    if sidecars and any(k in ("add", "remove") for k in keys):
        log_root = posixpath.dirname(checkpoint.files[0].path)
        file_keys = tuple(k for k in keys if k in ("add", "remove"))
        paths = [sidecar_path(log_root, sc.path) for sc in sidecars]
        for part in _read_parquet_files(store, paths, file_keys, table=table):
            tables.append(conform_table(part, schema))
    if not tables:
        return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    return pa.concat_tables(tables)


def _read_parquet_files(
    store: LogStore, paths: list[str], keys: tuple[str, ...], *, table: str
) -> list[pa.Table]:
    """:func:`_read_parquet` of each path, in order; two at a time when there are several
    (checkpoint parts, sidecars): one file's read overlaps another's decode. The first error in
    path order is raised."""
    if len(paths) <= 1:
        return [_read_parquet(store, p, keys, table=table) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="deltalog-checkpoint") as pool:
        return list(pool.map(lambda p: _read_parquet(store, p, keys, table=table), paths))


def checkpoint_sidecar_paths(store: LogStore, checkpoint: Checkpoint, *, table: str) -> list[str]:
    """Paths of the sidecar files a (V2) checkpoint names; empty for classic checkpoints."""
    top = checkpoint.files[0]
    if len(checkpoint.files) != 1:
        return []
    if top.name.endswith(".json"):
        sidecars = sidecars_in_json(store.read(top.path))
    else:
        part = _read_parquet(store, top.path, ("sidecar",), table=table)
        sidecars = sidecars_in_table(part) if "sidecar" in part.column_names else []
    log_root = posixpath.dirname(top.path)
    return [sidecar_path(log_root, sc.path) for sc in sidecars]


def _read_parquet(store: LogStore, path: str, keys: tuple[str, ...], *, table: str) -> pa.Table:
    """The action columns ``keys`` of one checkpoint parquet file, projected to the leaves
    replay needs (:mod:`deltalog.log.checkpoint_columns`); absent ones are the caller's to fill."""
    try:
        # An object store reads a large checkpoint by ranges: only the projected columns.
        open_input = getattr(store, "open_input", None)
        reader = open_parquet(store.read(path) if open_input is None else open_input(path))
        data = reader.read_all(column_indices=projected_leaves(reader, keys), use_threads=True)
    except FileNotFoundError:
        raise errors.InvalidTableError(
            "DELTA_CHECKPOINT_FILE_NOT_FOUND",
            f"Checkpoint file {path} is missing.",
            table=table,
            help="restore it, or delete _last_checkpoint so an older checkpoint is used.",
        ) from None
    except (OSError, pa.ArrowException) as e:
        raise errors.corrupt_checkpoint(table, path, str(e)) from None
    return _restore_stats(data)


def _restore_stats(data: pa.Table) -> pa.Table:
    """Checkpoints may carry ``add.stats_parsed`` instead of ``add.stats``: re-serialize to JSON."""
    if "add" not in data.column_names:
        return data
    add_type = data.schema.field("add").type
    if add_type.get_field_index("stats") >= 0 or add_type.get_field_index("stats_parsed") < 0:
        return data
    add = data["add"].combine_chunks()
    names = [add.type.field(i).name for i in range(add.type.num_fields)]
    parsed = add.field("stats_parsed").to_pylist()
    stats = k.strings(
        [None if p is None else json.dumps(p, default=str, separators=(",", ":")) for p in parsed]
    )
    children = [add.field(n) for n in names if n != "stats_parsed"] + [stats]
    fields = [add.type.field(n) for n in names if n != "stats_parsed"] + [
        pa.field("stats", pa.string())
    ]
    new = k.struct_array(pa.struct(fields), children, k.validity_of(add), len(add))
    return data.set_column(data.column_names.index("add"), "add", new)


def sidecars_in_json(data: bytes) -> list[Sidecar]:
    out = []
    for line in data.split(b"\n"):
        if b'"sidecar"' in line:
            obj = json.loads(line)
            if "sidecar" in obj:
                sc = action_from_dict("sidecar", obj["sidecar"])
                if isinstance(sc, Sidecar):
                    out.append(sc)
    return out


def sidecars_in_table(part: pa.Table) -> list[Sidecar]:
    column = part["sidecar"]
    if column.null_count == len(column):  # a classic checkpoint's empty sidecar column
        return []
    out = []
    for value in k.filter_rows(column, k.is_valid(column)).to_pylist():
        sc = action_from_dict("sidecar", value)
        if isinstance(sc, Sidecar):
            out.append(sc)
    return out


def sidecar_path(log_root: str, path: str) -> str:
    """Sidecar paths are relative to ``_delta_log/_sidecars/`` unless absolute."""
    return resolve(posixpath.join(log_root, SIDECAR_DIR), path)


def decode_line(line: bytes, *, table: str, file: str, lineno: int) -> tuple[str, Any]:
    """A commit line's action key and value.

    Raises:
        InvalidTableError: not a JSON object with one action key whose value is an object.
    """
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise errors.corrupt_commit(table, file, lineno, f"invalid JSON ({e})") from None
    if not isinstance(obj, dict) or len(obj) != 1:
        raise errors.corrupt_commit(table, file, lineno, "expected an object with one action key")
    ((key, value),) = obj.items()
    if value is not None and not isinstance(value, dict):
        raise errors.corrupt_commit(table, file, lineno, f"action {key!r} is not an object")
    return key, value
