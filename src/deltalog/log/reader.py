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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

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

    Raises:
        InvalidTableError: a line is not a JSON object with one action (e.g. a truncated last line).
    """
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
        key, value = _decode_line(line, table=table, file=file, lineno=index + 1)
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
        key, value = _decode_line(line, table=table, file=log_file.path, lineno=lineno)
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
    for f in checkpoint.files:
        if f.name.endswith(".json"):
            data = store.read(f.path)
            top = parse_commit(data, checkpoint.version, table=table, file=f.path)
            tables.append(top.rows.select(list(keys)))
            sidecars += sidecars_in_json(data)
        else:
            part = _read_parquet(store, f.path, (*keys, "sidecar"), table=table)
            if "sidecar" in part.column_names:
                sidecars += sidecars_in_table(part)
            tables.append(conform_table(part, schema))
    # A classic-named parquet file may also be a V2 checkpoint: its sidecar rows say so.
    if sidecars and any(k in ("add", "remove") for k in keys):
        log_root = posixpath.dirname(checkpoint.files[0].path)
        file_keys = tuple(k for k in keys if k in ("add", "remove"))
        for sc in sidecars:
            path = sidecar_path(log_root, sc.path)
            tables.append(conform_table(_read_parquet(store, path, file_keys, table=table), schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


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
    try:
        pf = pq.ParquetFile(pa.BufferReader(store.read(path)))
        present = [k for k in keys if k in pf.schema_arrow.names]
        # Columns ``add.stats_parsed`` and ``partitionValues_parsed`` are never needed for replay.
        columns = _leaf_columns(pf.schema_arrow, present)
        data = pf.read(columns=columns)
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


def _leaf_columns(schema: pa.Schema, keys: list[str]) -> list[str]:
    columns: list[str] = []
    for key in keys:
        t = schema.field(key).type
        if key == "add" and pa.types.is_struct(t):
            names = [t.field(i).name for i in range(t.num_fields)]
            skip = {"partitionValues_parsed"} | ({"stats_parsed"} if "stats" in names else set())
            columns += [f"add.{n}" for n in names if n not in skip]
        else:
            columns.append(key)
    return columns


def _restore_stats(data: pa.Table) -> pa.Table:
    """Checkpoints may carry ``add.stats_parsed`` instead of ``add.stats``: re-serialize to JSON."""
    if "add" not in data.column_names:
        return data
    add = data["add"].combine_chunks()
    names = [add.type.field(i).name for i in range(add.type.num_fields)]
    if "stats" in names or "stats_parsed" not in names:
        return data
    parsed = add.field("stats_parsed").to_pylist()
    stats = pa.array(
        [None if p is None else json.dumps(p, default=str, separators=(",", ":")) for p in parsed],
        pa.string(),
    )
    children = [add.field(n) for n in names if n != "stats_parsed"] + [stats]
    fields = [add.type.field(n) for n in names if n != "stats_parsed"] + [
        pa.field("stats", pa.string())
    ]
    new = pa.StructArray.from_arrays(
        children, fields=fields, mask=add.is_null() if add.null_count else None
    )
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
    out = []
    for value in column.drop_null().to_pylist():
        sc = action_from_dict("sidecar", value)
        if isinstance(sc, Sidecar):
            out.append(sc)
    return out


def sidecar_path(log_root: str, path: str) -> str:
    """Sidecar paths are relative to ``_delta_log/_sidecars/`` unless absolute."""
    return resolve(posixpath.join(log_root, SIDECAR_DIR), path)


def _decode_line(line: bytes, *, table: str, file: str, lineno: int) -> tuple[str, Any]:
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
