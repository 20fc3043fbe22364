"""Delta log actions (PROTOCOL.md "Actions"; seed ``Action``) as frozen, slotted dataclasses.

Single actions are small Python objects; bulk file state never is (see :mod:`deltalog.log.replay`).
Every class declares ``FIELDS`` (its field table) and ``ACTION_KEY`` (its single-action key); the
JSON codec here and all schemas derive from those. Unknown fields and unknown action types are
tolerated on read, as the protocol requires; ``commitInfo`` keeps unknown fields so it round-trips.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from deltalog.fields import (
    BOOLEAN,
    INT,
    LONG,
    STRING,
    STRING_MAP,
    ArrayOf,
    Field,
    MapOf,
    StructOf,
    arrow_struct,
)

# ------------------------------------------------------------------------------------------------
# Nested structs
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Format:
    """``metaData.format``: the data file format (always ``parquet``)."""

    provider: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)

    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("provider", "provider", STRING),
        Field("options", "options", STRING_MAP, always=True),
    )


@dataclass(frozen=True, slots=True)
class DeletionVectorDescriptor:
    """A deletion vector reference (PROTOCOL.md "Deletion Vector Descriptor Schema")."""

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None
    max_row_index: int | None = None

    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("storage_type", "storageType", STRING, nullable=False),
        Field("path_or_inline_dv", "pathOrInlineDv", STRING, nullable=False),
        Field("offset", "offset", INT),
        Field("size_in_bytes", "sizeInBytes", INT, nullable=False),
        Field("cardinality", "cardinality", LONG, nullable=False),
        Field("max_row_index", "maxRowIndex", LONG),
    )

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> DeletionVectorDescriptor:
        """From its JSON object (wire names), e.g. an ``all_files_arrow()`` deletionVector value."""
        descriptor: DeletionVectorDescriptor = _from_dict(cls, value)
        return descriptor

    def to_dict(self) -> dict[str, Any]:
        """Its JSON object (wire names), the inverse of :meth:`from_dict`."""
        return _to_dict(self)

    @property
    def unique_id(self) -> str:
        """``storageType + pathOrInlineDv`` (+ ``@offset``): the DV part of a file's replay key."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """``commitInfo.job``."""

    job_id: str | None = None
    job_name: str | None = None
    job_run_id: str | None = None
    run_id: str | None = None
    job_owner_id: str | None = None
    trigger_type: str | None = None

    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("job_id", "jobId", STRING),
        Field("job_name", "jobName", STRING),
        Field("job_run_id", "jobRunId", STRING),
        Field("run_id", "runId", STRING),
        Field("job_owner_id", "jobOwnerId", STRING),
        Field("trigger_type", "triggerType", STRING),
    )


@dataclass(frozen=True, slots=True)
class NotebookInfo:
    """``commitInfo.notebook``."""

    notebook_id: str | None = None

    FIELDS: ClassVar[tuple[Field, ...]] = (Field("notebook_id", "notebookId", STRING),)


# ------------------------------------------------------------------------------------------------
# Actions
# ------------------------------------------------------------------------------------------------


class Action:
    """Base of every action: JSON form, single-action form."""

    ACTION_KEY: ClassVar[str]
    FIELDS: ClassVar[tuple[Field, ...]]

    def to_dict(self) -> dict[str, Any]:
        """The action's JSON object (wire names, absent values omitted)."""
        return _to_dict(self)

    def wrap(self) -> dict[str, Any]:
        """The single-action form: ``{ACTION_KEY: {...}}`` (one line of a commit)."""
        return {self.ACTION_KEY: self.to_dict()}

    def to_json(self) -> str:
        """One compact JSON line, as written in a commit file."""
        return json.dumps(self.wrap(), separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Protocol(Action):
    """``protocol``: the reader and writer versions and table features the table needs."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    ACTION_KEY: ClassVar[str] = "protocol"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("min_reader_version", "minReaderVersion", INT, nullable=False),
        Field("min_writer_version", "minWriterVersion", INT, nullable=False),
        Field("reader_features", "readerFeatures", ArrayOf(STRING)),
        Field("writer_features", "writerFeatures", ArrayOf(STRING)),
    )

    def simple_string(self) -> str:
        """The reference's ``Protocol.simpleString``: the versions, then the feature lists
        when the protocol has them (for messages)."""
        text = f"{self.min_reader_version},{self.min_writer_version}"
        if self.reader_features is not None or self.writer_features is not None:
            text += f",{sorted(self.reader_features or ())},{sorted(self.writer_features or ())}"
        return text


@dataclass(frozen=True, slots=True)
class Metadata(Action):
    """``metaData``: table id, schema, partitioning and configuration."""

    id: str
    schema_string: str | None = None
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    format: Format = field(default_factory=Format)
    name: str | None = None
    description: str | None = None
    created_time: int | None = None

    ACTION_KEY: ClassVar[str] = "metaData"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("id", "id", STRING),
        Field("name", "name", STRING),
        Field("description", "description", STRING),
        Field("format", "format", StructOf(Format)),
        Field("schema_string", "schemaString", STRING),
        Field("partition_columns", "partitionColumns", ArrayOf(STRING), always=True),
        Field("configuration", "configuration", STRING_MAP, always=True),
        Field("created_time", "createdTime", LONG),
    )


_FILE_TAIL = (
    Field("tags", "tags", STRING_MAP),
    Field("deletion_vector", "deletionVector", StructOf(DeletionVectorDescriptor)),
    Field("base_row_id", "baseRowId", LONG),
    Field("default_row_commit_version", "defaultRowCommitVersion", LONG),
)


@dataclass(frozen=True, slots=True)
class AddFile(Action):
    """``add``: a data file (or a new deletion vector on it) becomes part of the table."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None

    ACTION_KEY: ClassVar[str] = "add"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("path", "path", STRING),
        Field("partition_values", "partitionValues", STRING_MAP, always=True),
        Field("size", "size", LONG, nullable=False),
        Field("modification_time", "modificationTime", LONG, nullable=False),
        Field("data_change", "dataChange", BOOLEAN, nullable=False),
        Field("stats", "stats", STRING),
        *_FILE_TAIL,
        Field("clustering_provider", "clusteringProvider", STRING),
    )


@dataclass(frozen=True, slots=True)
class RemoveFile(Action):
    """``remove``: a data file (or one deletion vector of it) leaves the table."""

    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    ACTION_KEY: ClassVar[str] = "remove"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("path", "path", STRING),
        Field("deletion_timestamp", "deletionTimestamp", LONG),
        Field("data_change", "dataChange", BOOLEAN, nullable=False),
        Field("extended_file_metadata", "extendedFileMetadata", BOOLEAN),
        Field("partition_values", "partitionValues", STRING_MAP),
        Field("size", "size", LONG),
        Field("stats", "stats", STRING),
        *_FILE_TAIL,
    )


@dataclass(frozen=True, slots=True)
class AddCDCFile(Action):
    """``cdc``: a change data file written by a commit (never part of snapshot state)."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    data_change: bool = False
    tags: dict[str, str | None] | None = None

    ACTION_KEY: ClassVar[str] = "cdc"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("path", "path", STRING),
        Field("partition_values", "partitionValues", STRING_MAP, always=True),
        Field("size", "size", LONG, nullable=False),
        Field("data_change", "dataChange", BOOLEAN, nullable=False),
        Field("tags", "tags", STRING_MAP),
    )


@dataclass(frozen=True, slots=True)
class SetTransaction(Action):
    """``txn``: the latest version an application committed (idempotent writes)."""

    app_id: str
    version: int
    last_updated: int | None = None

    ACTION_KEY: ClassVar[str] = "txn"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("app_id", "appId", STRING),
        Field("version", "version", LONG, nullable=False),
        Field("last_updated", "lastUpdated", LONG),
    )


@dataclass(frozen=True, slots=True)
class DomainMetadata(Action):
    """``domainMetadata``: named configuration; ``removed`` marks a tombstone."""

    domain: str
    configuration: str
    removed: bool = False

    ACTION_KEY: ClassVar[str] = "domainMetadata"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("domain", "domain", STRING),
        Field("configuration", "configuration", STRING),
        Field("removed", "removed", BOOLEAN, nullable=False),
    )


@dataclass(frozen=True, slots=True)
class CheckpointMetadata(Action):
    """``checkpointMetadata``: the header of a V2 checkpoint (checkpoint-only)."""

    version: int
    tags: dict[str, str | None] | None = None

    ACTION_KEY: ClassVar[str] = "checkpointMetadata"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("version", "version", LONG, nullable=False),
        Field("tags", "tags", STRING_MAP),
    )


@dataclass(frozen=True, slots=True)
class Sidecar(Action):
    """``sidecar``: a V2 checkpoint's reference to a parquet file of file actions."""

    path: str
    size_in_bytes: int
    modification_time: int
    tags: dict[str, str | None] | None = None

    ACTION_KEY: ClassVar[str] = "sidecar"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("path", "path", STRING),
        Field("size_in_bytes", "sizeInBytes", LONG, nullable=False),
        Field("modification_time", "modificationTime", LONG, nullable=False),
        Field("tags", "tags", STRING_MAP),
    )


@dataclass(frozen=True, slots=True)
class CommitInfo(Action):
    """``commitInfo``: free-form provenance. Unknown fields are kept in ``extra``."""

    timestamp: int | None = None
    in_commit_timestamp: int | None = None
    user_id: str | None = None
    user_name: str | None = None
    operation: str | None = None
    operation_parameters: dict[str, Any] | None = None
    job: JobInfo | None = None
    notebook: NotebookInfo | None = None
    cluster_id: str | None = None
    read_version: int | None = None
    isolation_level: str | None = None
    is_blind_append: bool | None = None
    operation_metrics: dict[str, str | None] | None = None
    user_metadata: str | None = None
    engine_info: str | None = None
    txn_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    ACTION_KEY: ClassVar[str] = "commitInfo"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        # The reference writes inCommitTimestamp first, so readers find it without a full parse.
        Field("in_commit_timestamp", "inCommitTimestamp", LONG),
        Field("timestamp", "timestamp", LONG),
        Field("user_id", "userId", STRING),
        Field("user_name", "userName", STRING),
        Field("operation", "operation", STRING),
        Field("operation_parameters", "operationParameters", MapOf(raw_json_values=True)),
        Field("job", "job", StructOf(JobInfo)),
        Field("notebook", "notebook", StructOf(NotebookInfo)),
        Field("cluster_id", "clusterId", STRING),
        Field("read_version", "readVersion", LONG),
        Field("isolation_level", "isolationLevel", STRING),
        Field("is_blind_append", "isBlindAppend", BOOLEAN),
        Field("operation_metrics", "operationMetrics", STRING_MAP),
        Field("user_metadata", "userMetadata", STRING),
        Field("engine_info", "engineInfo", STRING),
        Field("txn_id", "txnId", STRING),
    )


ACTION_CLASSES: tuple[type[Action], ...] = (
    SetTransaction,
    AddFile,
    RemoveFile,
    Metadata,
    Protocol,
    AddCDCFile,
    CommitInfo,
    DomainMetadata,
    CheckpointMetadata,
    Sidecar,
)
ACTIONS_BY_KEY: dict[str, type[Action]] = {c.ACTION_KEY: c for c in ACTION_CLASSES}

# The SingleAction layout of the log: one nullable struct column per action type. Order follows
# the reference's logSchema, newer actions last.
LOG_SCHEMA: pa.Schema = pa.schema(
    [pa.field(c.ACTION_KEY, arrow_struct(c.FIELDS)) for c in ACTION_CLASSES]
)

# What replay needs: everything but commitInfo and cdc (commitInfo's free-form maps do not fit a
# fixed schema, and neither ever contributes to snapshot state).
REPLAY_ACTION_KEYS: tuple[str, ...] = (
    "txn",
    "add",
    "remove",
    "metaData",
    "protocol",
    "domainMetadata",
)
# The non-file actions replay keeps (few; decoded into objects).
NON_FILE_KEYS: tuple[str, ...] = ("protocol", "metaData", "txn", "domainMetadata")
REPLAY_SCHEMA: pa.Schema = pa.schema([LOG_SCHEMA.field(k) for k in REPLAY_ACTION_KEYS])
ADD_SCHEMA: pa.StructType = LOG_SCHEMA.field("add").type
REMOVE_SCHEMA: pa.StructType = LOG_SCHEMA.field("remove").type


def action_from_dict(key: str, value: dict[str, Any] | None) -> Action | None:
    """Decode one single-action entry; ``None`` for an action type this version does not know."""
    cls = ACTIONS_BY_KEY.get(key)
    if cls is None or value is None:
        return None
    action: Action = _from_dict(cls, value)
    return action


def action_from_json(line: str) -> Action | None:
    """Decode one commit line (``{"add": {...}}``); ``None`` for unknown action types.

    Raises:
        ValueError: the line is not a JSON object with exactly one key.
    """
    obj = json.loads(line)
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ValueError("a log line must be a JSON object with exactly one action key")
    ((key, value),) = obj.items()
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"action {key!r} must be a JSON object")
    return action_from_dict(key, value)


def remove_action(row: Mapping[str, Any], now_ms: int, *, data_change: bool = True) -> RemoveFile:
    """The ``remove`` of a live file (one row of ``all_files_arrow()``), as the reference
    writes it: extended metadata, partition values, size, stats, deletion vector."""
    dv = row.get("deletionVector")
    return RemoveFile(
        path=row["path"],
        deletion_timestamp=now_ms,
        data_change=data_change,
        extended_file_metadata=True,
        partition_values=dict(row.get("partitionValues") or []),
        size=row.get("size"),
        stats=row.get("stats"),
        tags=dict(row["tags"]) if row.get("tags") else None,
        deletion_vector=DeletionVectorDescriptor.from_dict(dv) if dv else None,
        base_row_id=row.get("baseRowId"),
        default_row_commit_version=row.get("defaultRowCommitVersion"),
    )


# ------------------------------------------------------------------------------------------------
# Generic codec over field tables
# ------------------------------------------------------------------------------------------------


def _from_dict(cls: Any, value: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    known = set()
    for f in cls.FIELDS:
        known.add(f.json)
        raw = value.get(f.json)
        if raw is None:
            continue
        if isinstance(f.type, StructOf):
            kwargs[f.attr] = _from_dict(f.type.cls, raw)
        elif isinstance(f.type, ArrayOf):
            kwargs[f.attr] = tuple(raw)
        elif isinstance(f.type, MapOf):
            kwargs[f.attr] = dict(raw)
        else:
            kwargs[f.attr] = raw
    if cls is CommitInfo:
        kwargs["extra"] = {k: v for k, v in value.items() if k not in known}
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is absent
        raise ValueError(f"{getattr(cls, 'ACTION_KEY', cls.__name__)}: {e}") from None


def _to_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in obj.FIELDS:
        v = getattr(obj, f.attr)
        if v is None:
            if f.always:
                out[f.json] = [] if isinstance(f.type, ArrayOf) else {}
            continue
        if isinstance(f.type, StructOf):
            out[f.json] = _to_dict(v)
        elif isinstance(f.type, ArrayOf):
            out[f.json] = list(v)
        elif isinstance(f.type, MapOf):
            out[f.json] = dict(v)
        else:
            out[f.json] = v
    if isinstance(obj, CommitInfo):
        out.update(obj.extra)
    return out
