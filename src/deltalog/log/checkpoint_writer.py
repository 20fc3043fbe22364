"""Writing checkpoints (reference ``Checkpoints.writeCheckpoint``; PROTOCOL.md "Checkpoints").

:func:`write_checkpoint` writes the state of a snapshot as one classic, single-file checkpoint
``<v20>.checkpoint.parquet``, then points ``_last_checkpoint`` at it.

* Content: protocol, metaData, live domainMetadata, unexpired txns, live adds and unexpired
  tombstones (``commitInfo`` and ``cdc`` never). File actions carry ``dataChange=false``.
* Parquet layout as the reference writes it: top-level columns ``txn, add, remove, metaData,
  protocol, domainMetadata``, every field nullable, ``partitionValues``/``tags`` as
  ``map<string,string>``, ``stats`` as JSON text at the end of ``add``, ``remove`` without
  ``stats`` and ``tags``. ``partitionValues_parsed``/``stats_parsed`` are not written (optional
  for every reader), so JSON stats are kept even under ``delta.checkpoint.writeStatsAsJson=false``
  (the reference then relies on ``stats_parsed``; dropping both would lose the statistics).
* Tables with ``delta.checkpointPolicy=v2`` (and the ``v2Checkpoint`` feature) get a V2
  checkpoint under the classic name: the same file plus a ``checkpointMetadata`` row and an (empty)
  ``sidecar`` column, all file actions inline. The protocol allows this; UUID-named files and
  sidecars are not written.
* The file appears atomically (put-if-absent). When it already exists another writer checkpointed
  this version: its file is kept (a zero-length or unreadable one is replaced).
* ``_last_checkpoint`` is written last, with its checksum, and never moved to an older version.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.actions import LOG_SCHEMA, CheckpointMetadata
from deltalog.features import is_feature_supported
from deltalog.fields import conform_array
from deltalog.log.filenames import LAST_CHECKPOINT
from deltalog.log.last_checkpoint import LastCheckpointInfo, checksum, parse_last_checkpoint
from deltalog.schema import as_nullable, schema_from_arrow

if TYPE_CHECKING:
    from deltalog.snapshot import Snapshot
    from deltalog.storage.base import LogStore

log = logging.getLogger(__name__)

# Top-level columns of a classic checkpoint, in the reference's order (its log schema without
# commitInfo, cdc, checkpointMetadata and sidecar); V2 checkpoints add the last two back.
_CLASSIC_KEYS = ("txn", "add", "remove", "metaData", "protocol", "domainMetadata")
_V2_KEYS = (*_CLASSIC_KEYS, "checkpointMetadata", "sidecar")
# Fields the reference drops from checkpoint ``remove`` structs.
_REMOVE_DROPPED = ("stats", "tags")


def checkpoint_file_name(version: int) -> str:
    """File name of the classic single-file checkpoint of ``version``."""
    return f"{version:020d}.checkpoint.parquet"


def checkpoint_schema(*, v2: bool = False) -> pa.Schema:
    """The Arrow schema of the checkpoints :func:`write_checkpoint` writes.

    ``add`` has the reference's field order (``stats`` last); ``remove`` has no ``stats`` or
    ``tags``; everything is nullable.
    """
    add_type: pa.StructType = LOG_SCHEMA.field("add").type
    add_fields = [f for f in add_type if f.name != "stats"]
    add_fields.append(add_type.field("stats"))
    remove_type: pa.StructType = LOG_SCHEMA.field("remove").type
    remove_fields = [f for f in remove_type if f.name not in _REMOVE_DROPPED]
    fields = []
    for key in _V2_KEYS if v2 else _CLASSIC_KEYS:
        if key == "add":
            fields.append(pa.field(key, pa.struct(add_fields)))
        elif key == "remove":
            fields.append(pa.field(key, pa.struct(remove_fields)))
        else:
            fields.append(LOG_SCHEMA.field(key))
    return pa.schema(fields)


@dataclass(frozen=True, slots=True)
class _Written:
    """What the checkpoint file at the target path holds."""

    num_actions: int  # -1 when unknown (file actions in sidecars of another writer's file)
    num_adds: int | None
    size_in_bytes: int
    schema: pa.Schema


def write_checkpoint(store: LogStore, snapshot: Snapshot) -> LastCheckpointInfo:
    """Write a checkpoint of ``snapshot`` at its version, then update ``_last_checkpoint``.

    Works for snapshots of either engine (only their public Arrow accessors are used).

    Returns:
        What was (or, when ``_last_checkpoint`` already names a newer checkpoint, would have
        been) written to ``_last_checkpoint``, with its checksum.

    Raises:
        InternalError: ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` when the rows prepared hold a
            different number of live files than the snapshot (nothing is written then).
    """
    log_root = snapshot.segment.log_root
    version = snapshot.version
    v2 = _uses_v2_checkpoints(snapshot)
    table = checkpoint_table(snapshot, v2=v2)

    expected = snapshot.num_of_files
    num_adds = table.num_rows - table["add"].null_count
    if num_adds != expected:
        raise errors.checkpoint_snapshot_mismatch(snapshot.table_root, version, num_adds, expected)
    data = _to_parquet(table)
    meta = pq.read_metadata(pa.BufferReader(data))
    if meta.num_rows != table.num_rows:
        raise errors.checkpoint_snapshot_mismatch(
            snapshot.table_root, version, meta.num_rows, table.num_rows
        )

    path = f"{log_root}/{checkpoint_file_name(version)}"
    written = _Written(table.num_rows, num_adds, len(data), table.schema)
    try:
        store.write_if_absent(path, data)
    except FileExistsError:
        existing = _inspect_existing(store, path)
        if existing is None:
            log.warning("Replacing the unreadable checkpoint %s", path)
            store.overwrite(path, data)
        else:
            log.info("Checkpoint %s already exists; keeping it", path)
            written = existing
    written = _Written(written.num_actions, written.num_adds, store.stat(path).size, written.schema)
    return _write_last_checkpoint(store, log_root, version, written)


def checkpoint_table(snapshot: Snapshot, *, v2: bool = False) -> pa.Table:
    """The rows of a checkpoint of ``snapshot`` (:func:`checkpoint_schema`): the non-file
    actions (``checkpointMetadata`` first for V2), then live adds, then unexpired tombstones."""
    schema = checkpoint_schema(v2=v2)
    head: list[dict[str, Any]] = []
    if v2:
        head.append(CheckpointMetadata(version=snapshot.version).wrap())
    head.append(snapshot.protocol.wrap())
    head.append(snapshot.metadata.wrap())
    head += [d.wrap() for d in snapshot.domain_metadata]
    head += [t.wrap() for t in snapshot.set_transactions]
    head_table = pa.Table.from_pylist(head, schema=schema)

    add_type: pa.StructType = schema.field("add").type
    remove_type: pa.StructType = schema.field("remove").type
    adds = _as_struct(_sorted_by_path(snapshot.all_files_arrow()), add_type)
    removes = _as_struct(_sorted_by_path(snapshot.tombstones_arrow()), remove_type)
    n_add, n_remove = len(adds), len(removes)
    n = n_add + n_remove
    columns = []
    for field in schema:
        if field.name == "add":
            columns.append(pa.concat_arrays([adds, pa.nulls(n_remove, add_type)]))
        elif field.name == "remove":
            columns.append(pa.concat_arrays([pa.nulls(n_add, remove_type), removes]))
        else:
            columns.append(pa.nulls(n, field.type))
    files = pa.Table.from_arrays(columns, schema=schema)
    return pa.concat_tables([head_table, files]).combine_chunks()


def spark_schema_json(schema: pa.Schema) -> dict[str, Any]:
    """``schema`` as Spark's ``StructType`` JSON with every field nullable (the form of
    ``_last_checkpoint.checkpointSchema``).

    Raises:
        DeltaWriteError: a column type outside the Delta log's and stats' types.
    """
    result: dict[str, Any] = json.loads(as_nullable(schema_from_arrow(schema)).to_json())
    return result


# -- internals ------------------------------------------------------------------------------


def _uses_v2_checkpoints(snapshot: Snapshot) -> bool:
    policy = (snapshot.properties.get("delta.checkpointPolicy") or "classic").strip().lower()
    return policy == "v2" and is_feature_supported(snapshot.protocol, "v2Checkpoint")


def _sorted_by_path(table: pa.Table) -> pa.Table:
    if table.num_rows <= 1:
        return table
    return table.take(pc.sort_indices(table["path"]))


def _as_struct(table: pa.Table, struct: pa.StructType) -> pa.Array:
    """The columns of ``table`` as one struct array of type ``struct`` (missing fields null,
    extra columns dropped, compatible types cast)."""
    names = set(table.column_names)
    fields = [f for f in struct if f.name in names]
    children = [conform_array(table.column(f.name), f.type) for f in fields]
    if not fields:
        return pa.nulls(table.num_rows, struct)
    array = pa.StructArray.from_arrays(children, fields=fields)
    return conform_array(array, struct)


def _to_parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression="snappy",
        use_compliant_nested_type=True,
        data_page_version="1.0",
    )
    return bytes(sink.getvalue().to_pybytes())


def _inspect_existing(store: LogStore, path: str) -> _Written | None:
    """Describe the checkpoint another writer left at ``path``; ``None`` if it is unusable
    (empty, not parquet, or without protocol/metadata columns)."""
    try:
        data = store.read(path)
    except FileNotFoundError:
        return None
    if not data:
        return None
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        names = pf.schema_arrow.names
        if "protocol" not in names or "metaData" not in names:
            return None
        if "sidecar" in names and pf.read(columns=["sidecar.path"])["sidecar"].null_count < (
            pf.metadata.num_rows
        ):
            # A V2 checkpoint under the classic name (the reference's compatibility copy of a
            # V2 checkpoint): its file actions live in sidecars we do not count.
            return _Written(-1, None, len(data), pf.schema_arrow)
        num_adds = 0
        if "add" in names:
            paths = pf.read(columns=["add.path"])["add"]
            num_adds = len(paths) - paths.null_count
        return _Written(pf.metadata.num_rows, num_adds, len(data), pf.schema_arrow)
    except (OSError, pa.ArrowException):
        return None


def _write_last_checkpoint(
    store: LogStore, log_root: str, version: int, written: _Written
) -> LastCheckpointInfo:
    info = LastCheckpointInfo(
        version=version,
        size=written.num_actions,
        size_in_bytes=written.size_in_bytes,
        num_of_add_files=written.num_adds,
    )
    body = info.to_dict()
    # Another writer's file may hold a column type we do not map: the field is optional.
    with contextlib.suppress(errors.DeltaWriteError):
        body["checkpointSchema"] = spark_schema_json(written.schema)
    digest = checksum(body)
    body["checksum"] = digest
    info = LastCheckpointInfo(
        version=info.version,
        size=info.size,
        size_in_bytes=info.size_in_bytes,
        num_of_add_files=info.num_of_add_files,
        checksum=digest,
    )
    path = f"{log_root}/{LAST_CHECKPOINT}"
    try:
        current = parse_last_checkpoint(store.read(path))
    except FileNotFoundError:
        current = None
    if current is not None and current.version > version:
        log.info(
            "%s already names checkpoint %d, newer than %d; leaving it",
            path,
            current.version,
            version,
        )
        return info
    store.overwrite(path, json.dumps(body, separators=(",", ":")).encode("utf-8"))
    return info
