"""Writing checkpoints (reference ``Checkpoints.writeCheckpoint``; PROTOCOL.md "Checkpoints").

:func:`write_checkpoint` writes the state of a snapshot as a checkpoint of one of the protocol's
kinds, then points ``_last_checkpoint`` at it:

* **classic** ``<v20>.checkpoint.parquet``, one file (the default);
* **multi-part** ``<v20>.checkpoint.<i:010d>.<n:010d>.parquet`` when
  :attr:`CheckpointOptions.part_size` is set and the state holds more actions than that (the
  reference's ``spark.databricks.delta.checkpoint.partSize``): the rows are cut into ``n``
  contiguous slices in the snapshot's (deterministic) order, so two deltalog writers of the
  same version write the same parts;
* **V2** for tables with ``delta.checkpointPolicy=v2`` (and the ``v2Checkpoint`` feature): file
  actions go to sidecars ``_delta_log/_sidecars/<v20>.checkpoint.<i:010d>.<n:010d>.<uuid>.parquet``
  of at most :attr:`CheckpointOptions.sidecar_actions` rows, then a UUID-named top-level file
  ``<v20>.checkpoint.<uuid>.parquet`` (or ``.json``) holds ``checkpointMetadata``, the non-file
  actions and one ``sidecar`` action per sidecar.

Content: protocol, metaData, live domainMetadata, unexpired txns, live adds and unexpired
tombstones (``commitInfo`` and ``cdc`` never), file actions with ``dataChange=false``. Parquet
layout as the reference writes it: top-level columns ``txn, add, remove, metaData, protocol,
domainMetadata``, every field nullable, ``partitionValues``/``tags`` as ``map<string,string>``,
``stats`` as JSON text at the end of ``add``, ``remove`` without ``stats`` and ``tags``.
``partitionValues_parsed``/``stats_parsed`` are not written (optional for every reader), so JSON
stats are kept even under ``delta.checkpoint.writeStatsAsJson=false``.

Crash safety: every file appears atomically (put-if-absent) and ``_last_checkpoint`` is written
last, so a writer killed at any point leaves either no checkpoint, an incomplete multi-part set
that readers ignore, sidecars no top-level file names (removed by log cleanup), or a complete
checkpoint. A classic file or part that already exists was written by another writer of this
version: it is kept (a zero-length or unreadable one is replaced). The number of live files in
the rows is checked against the snapshot before anything is written. ``_last_checkpoint`` never
moves to an older version.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.actions import LOG_SCHEMA, Action, CheckpointMetadata, Sidecar
from deltalog.features import is_feature_supported
from deltalog.fields import conform_array
from deltalog.log.checkpoint_options import CheckpointOptions
from deltalog.log.filenames import LAST_CHECKPOINT, SIDECAR_DIR
from deltalog.log.last_checkpoint import LastCheckpointInfo, checksum, parse_last_checkpoint
from deltalog.schema import as_nullable, schema_from_arrow

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
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


def part_file_name(version: int, part: int, parts: int) -> str:
    """File name of part ``part`` (1-based) of a ``parts``-part checkpoint of ``version``."""
    return f"{version:020d}.checkpoint.{part:010d}.{parts:010d}.parquet"


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
    schema: pa.Schema | None  # None: a JSON top-level file (no checkpointSchema)
    parts: int | None = None


def write_checkpoint(
    store: LogStore, snapshot: Snapshot, options: CheckpointOptions | None = None
) -> LastCheckpointInfo:
    """Write a checkpoint of ``snapshot`` at its version (the kind the module describes), then
    update ``_last_checkpoint``.

    Works for snapshots of either engine (only their public Arrow accessors are used).

    Returns:
        What was (or, when ``_last_checkpoint`` already names a newer checkpoint, would have
        been) written to ``_last_checkpoint``, with its checksum.

    Raises:
        InternalError: ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` when the rows prepared hold a
            different number of live files than the snapshot (nothing is written then).
    """
    options = options or CheckpointOptions()
    v2 = _uses_v2_checkpoints(snapshot)
    if v2:
        # A big Spark-engine state writes its sidecars in tasks, validated there (the same
        # replay that reads it); the top-level file and ``_last_checkpoint`` come after.
        sidecars = snapshot.write_sidecars(store, options)
        if sidecars is not None:
            head = pa.Table.from_pylist(
                [a.wrap() for a in _non_file_actions(snapshot, v2=True)],
                schema=checkpoint_schema(v2=True),
            )
            written = _write_v2_top(store, snapshot, head, sidecars, options)
            return _write_last_checkpoint(
                store, snapshot.segment.log_root, snapshot.version, written
            )
    head, files = checkpoint_rows(snapshot, v2=v2)
    num_adds = files.num_rows - files["add"].null_count
    if num_adds != snapshot.num_of_files:
        raise errors.checkpoint_snapshot_mismatch(
            snapshot.table_root, snapshot.version, num_adds, snapshot.num_of_files
        )
    if v2:
        written = _write_v2(store, snapshot, head, files, options)
    elif options.part_size is not None and head.num_rows + files.num_rows > options.part_size:
        written = _write_parts(store, snapshot, pa.concat_tables([head, files]), options.part_size)
    else:
        written = _write_single(store, snapshot, pa.concat_tables([head, files]))
    return _write_last_checkpoint(store, snapshot.segment.log_root, snapshot.version, written)


def checkpoint_table(snapshot: Snapshot, *, v2: bool = False) -> pa.Table:
    """The rows of a checkpoint of ``snapshot`` with every action inline
    (:func:`checkpoint_schema`): the non-file actions (``checkpointMetadata`` first for V2),
    then live adds, then unexpired tombstones."""
    return pa.concat_tables(checkpoint_rows(snapshot, v2=v2))


def checkpoint_rows(snapshot: Snapshot, *, v2: bool = False) -> tuple[pa.Table, pa.Table]:
    """The non-file rows and the file rows (live adds, then unexpired tombstones) of a
    checkpoint of ``snapshot``, both of :func:`checkpoint_schema`.

    File rows keep the snapshot's order: sorting a million paths costs seconds and no reader
    needs it.
    """
    schema = checkpoint_schema(v2=v2)
    head = [a.wrap() for a in _non_file_actions(snapshot, v2=v2)]
    head_table = pa.Table.from_pylist(head, schema=schema)
    files = file_rows(snapshot.all_files_arrow(), snapshot.tombstones_arrow(), v2=v2)
    return head_table, files


def file_rows(adds_table: pa.Table, removes_table: pa.Table, *, v2: bool = False) -> pa.Table:
    """Checkpoint rows (:func:`checkpoint_schema`) of live ``add`` actions, then tombstones,
    both given as flat tables with the log's column names (as the snapshot's accessors give
    them). Runs wherever a checkpoint's file rows are made (the driver or Spark tasks)."""
    schema = checkpoint_schema(v2=v2)
    add_type: pa.StructType = schema.field("add").type
    remove_type: pa.StructType = schema.field("remove").type
    adds = _as_struct(adds_table, add_type)
    removes = _as_struct(removes_table, remove_type)
    n_add, n_remove = len(adds), len(removes)
    n = n_add + n_remove
    columns = []
    for field in schema:
        if field.name == "add":
            columns.append(pa.chunked_array([adds, pa.nulls(n_remove, add_type)], add_type))
        elif field.name == "remove":
            columns.append(pa.chunked_array([pa.nulls(n_add, remove_type), removes], remove_type))
        else:
            columns.append(pa.chunked_array([pa.nulls(n, field.type)], field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _write_single(store: LogStore, snapshot: Snapshot, table: pa.Table) -> _Written:
    path = f"{snapshot.segment.log_root}/{checkpoint_file_name(snapshot.version)}"
    return _put_parquet(store, snapshot, path, table)


def _write_parts(store: LogStore, snapshot: Snapshot, table: pa.Table, part_size: int) -> _Written:
    """A multi-part checkpoint: ``table`` cut into contiguous slices of ≤ ``part_size`` rows."""
    parts = math.ceil(table.num_rows / part_size)
    log_root = snapshot.segment.log_root
    written = []
    for i in range(parts):
        path = f"{log_root}/{part_file_name(snapshot.version, i + 1, parts)}"
        written.append(_put_parquet(store, snapshot, path, table.slice(i * part_size, part_size)))
    adds = [w.num_adds for w in written]
    return _Written(
        sum(w.num_actions for w in written),
        None if None in adds else sum(a for a in adds if a is not None),
        sum(w.size_in_bytes for w in written),
        table.schema,
        parts,
    )


@dataclass(frozen=True, slots=True)
class WrittenSidecar:
    """A V2 sidecar file now in ``_delta_log/_sidecars`` and what it holds."""

    sidecar: Sidecar
    num_actions: int
    num_adds: int


def write_sidecar(
    store: LogStore, log_root: str, version: int, index: int, count: int, files: pa.Table
) -> WrittenSidecar:
    """Write the file rows ``files`` (of :func:`file_rows`) as sidecar ``index`` of ``count``
    of the V2 checkpoint of ``version``, under a fresh UUID name (so never over another
    file). The parquet is checked to hold every row before it is written.

    Raises:
        InternalError: ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` when it does not.
    """
    actions = files.select(["add", "remove"])
    data = _to_parquet(actions)
    rows = pq.read_metadata(pa.BufferReader(data)).num_rows
    if rows != actions.num_rows:
        raise errors.checkpoint_snapshot_mismatch(log_root, version, rows, actions.num_rows)
    name = f"{version:020d}.checkpoint.{index:010d}.{count:010d}.{uuid.uuid4()}.parquet"
    path = f"{log_root}/{SIDECAR_DIR}/{name}"
    store.write_if_absent(path, data)
    info = store.stat(path)
    num_adds = actions.num_rows - actions["add"].null_count
    return WrittenSidecar(Sidecar(name, info.size, info.modification_time), rows, num_adds)


def _write_v2(
    store: LogStore,
    snapshot: Snapshot,
    head: pa.Table,
    files: pa.Table,
    options: CheckpointOptions,
) -> _Written:
    """Sidecars of file actions first, then the UUID-named top-level file naming them."""
    step = options.sidecar_actions
    count = math.ceil(files.num_rows / step)
    log_root, version = snapshot.segment.log_root, snapshot.version
    sidecars = [
        write_sidecar(store, log_root, version, i + 1, count, files.slice(i * step, step))
        for i in range(count)
    ]
    return _write_v2_top(store, snapshot, head, sidecars, options)


def _write_v2_top(
    store: LogStore,
    snapshot: Snapshot,
    head: pa.Table,
    written: list[WrittenSidecar],
    options: CheckpointOptions,
) -> _Written:
    """The UUID-named top-level file: ``head`` (non-file actions) and one ``sidecar`` action
    per sidecar written."""
    log_root = snapshot.segment.log_root
    version = snapshot.version
    sidecars = [w.sidecar for w in written]
    size = sum(s.size_in_bytes for s in sidecars)
    rows = [s.wrap() for s in sidecars]
    top = pa.concat_tables([head, pa.Table.from_pylist(rows, schema=head.schema)])
    if options.v2_top_level_format == "json":
        path = f"{log_root}/{version:020d}.checkpoint.{uuid.uuid4()}.json"
        lines = [a.to_json() for a in [*_non_file_actions(snapshot, v2=True), *sidecars]]
        store.write_if_absent(path, ("\n".join(lines) + "\n").encode("utf-8"))
        schema = None
    else:
        path = f"{log_root}/{version:020d}.checkpoint.{uuid.uuid4()}.parquet"
        store.write_if_absent(path, _to_parquet(top))
        schema = top.schema
    size += store.stat(path).size
    num_actions = head.num_rows + sum(w.num_actions for w in written)
    return _Written(num_actions, sum(w.num_adds for w in written), size, schema)


def _non_file_actions(snapshot: Snapshot, *, v2: bool) -> list[Action]:
    """``checkpointMetadata`` (V2), protocol, metaData, live domains and unexpired txns."""
    head: list[Action] = [CheckpointMetadata(version=snapshot.version)] if v2 else []
    head += [snapshot.protocol, snapshot.metadata]
    head += snapshot.domain_metadata
    head += snapshot.set_transactions
    return head


def _put_parquet(store: LogStore, snapshot: Snapshot, path: str, table: pa.Table) -> _Written:
    """Write ``table`` at ``path`` unless a usable file is there (kept, and described)."""
    data = _to_parquet(table)
    meta = pq.read_metadata(pa.BufferReader(data))
    if meta.num_rows != table.num_rows:
        raise errors.checkpoint_snapshot_mismatch(
            snapshot.table_root, snapshot.version, meta.num_rows, table.num_rows
        )
    num_adds = table.num_rows - table["add"].null_count
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
    return _Written(written.num_actions, written.num_adds, store.stat(path).size, written.schema)


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
        parts=written.parts,
        size_in_bytes=written.size_in_bytes,
        num_of_add_files=written.num_adds,
    )
    body = info.to_dict()
    # Another writer's file may hold a column type we do not map: the field is optional.
    if written.schema is not None:
        with contextlib.suppress(errors.DeltaWriteError):
            body["checkpointSchema"] = spark_schema_json(written.schema)
    digest = checksum(body)
    body["checksum"] = digest
    info = LastCheckpointInfo(
        version=info.version,
        size=info.size,
        parts=info.parts,
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
