"""The test oracle: what ``deltalake`` (delta-rs) says a table is, in deltalog's terms."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from deltalog.log.snapshot import Snapshot
from deltalog.partition_values import parse_partition_value

# The shared folder sits beside the repository (CI's layout); DELTALOG_SHARED overrides it.
SHARED = Path(
    os.environ.get("DELTALOG_SHARED", Path(__file__).resolve().parents[3] / "shared")
).resolve()
TABLES = SHARED / "tables"


def discover_tables() -> list[str]:
    """Every table root under shared/tables (a directory holding ``_delta_log``), relative."""
    roots = []
    for dirpath, dirnames, _ in os.walk(TABLES):
        if "_delta_log" in dirnames:
            roots.append(os.path.relpath(dirpath, TABLES))
        dirnames[:] = [d for d in dirnames if d != "_delta_log"]
    return sorted(roots)


@dataclass(frozen=True)
class FileState:
    """One active file as both sides can describe it."""

    path: str
    size: int
    partition_values: tuple[tuple[str, Any], ...]
    dv_cardinality: int | None


@dataclass(frozen=True)
class TableState:
    version: int
    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str]
    writer_features: frozenset[str]
    metadata_id: str
    files: frozenset[FileState]


def oracle_state(dt_table: Any, root: str) -> TableState:
    """The state ``deltalake`` reports for the version it has loaded."""
    proto = dt_table.protocol()
    adds = pa.table(dt_table.get_add_actions(flatten=False))
    dvs = {_norm(p, root): sel for p, sel in _deletion_vectors(dt_table)}
    files = set()
    parts = adds["partition"].to_pylist() if "partition" in adds.column_names else None
    for i, (path, size) in enumerate(
        zip(adds["path"].to_pylist(), adds["size_bytes"].to_pylist(), strict=True)
    ):
        pv = parts[i] if parts is not None else {}
        values = tuple(sorted((k, _norm_value(v)) for k, v in (pv or {}).items()))
        sel = dvs.get(_norm(path, root))
        card = None if sel is None else sel.count(False)
        files.add(FileState(_norm(path, root), size, values, card))
    return TableState(
        version=dt_table.version(),
        min_reader_version=proto.min_reader_version,
        min_writer_version=proto.min_writer_version,
        reader_features=frozenset(proto.reader_features or ()),
        writer_features=frozenset(proto.writer_features or ()),
        metadata_id=dt_table.metadata().id,
        files=frozenset(files),
    )


def our_state(snapshot: Snapshot, *, files: pa.Table | None = None) -> TableState:
    """The same description of a deltalog snapshot."""
    proto = snapshot.protocol
    schema = snapshot.schema
    by_physical = {f.physical_name: f for f in schema.fields}
    files = snapshot.all_files_arrow() if files is None else files
    out = set()
    for row in files.select(["path", "size", "partitionValues", "deletionVector"]).to_pylist():
        values = []
        for key, raw in row["partitionValues"] or []:
            field = by_physical.get(key)
            name = field.name if field is not None else key
            value = parse_partition_value(raw, field.type) if field is not None else raw
            values.append((name, _norm_value(value)))
        dv = row["deletionVector"]
        out.add(
            FileState(
                _norm(row["path"], snapshot.table_root),
                row["size"],
                tuple(sorted(values)),
                None if dv is None else dv["cardinality"],
            )
        )
    return TableState(
        version=snapshot.version,
        min_reader_version=proto.min_reader_version,
        min_writer_version=proto.min_writer_version,
        reader_features=frozenset(proto.reader_features or ()),
        writer_features=frozenset(proto.writer_features or ()),
        metadata_id=snapshot.metadata.id,
        files=frozenset(out),
    )


def _deletion_vectors(dt_table: Any) -> list[tuple[str, list[bool]]]:
    try:
        t = pa.table(dt_table.deletion_vectors())
    except Exception:  # tables without DVs may not support the call
        return []
    return list(zip(t["filepath"].to_pylist(), t["selection_vector"].to_pylist(), strict=True))


def _norm(path: str, root: str) -> str:
    """A path in decoded, table-relative form (delta-rs returns URIs for DVs, raw log paths for
    adds; either may be percent-encoded)."""
    p = path
    if p.startswith("file://"):
        p = p[len("file://") :]
    elif p.startswith("file:"):
        p = p[len("file:") :]
    p = unquote(p)
    # delta-rs resolves symbolic links in the URIs it returns; accept both forms of the root.
    for prefix in {root.rstrip("/") + "/", os.path.realpath(root).rstrip("/") + "/"}:
        if p.startswith(prefix):
            return p[len(prefix) :]
    return p


def _norm_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return ("ts", v.isoformat())
    if isinstance(v, decimal.Decimal):
        return ("dec", str(v.normalize()) if v == v.to_integral() else str(v))
    if isinstance(v, float):
        return ("num", repr(v))
    if isinstance(v, int) and not isinstance(v, bool):
        return ("num", str(v))
    if isinstance(v, bytes):
        return ("bin", v.hex())
    return v
