"""Operations: what a commit says it did (reference ``DeltaOperations``), and the ``commitInfo``
built from it.

An :class:`Operation` has the reference's name (``WRITE``, ``CREATE TABLE``...), its parameters
as Python values and its metrics. :func:`encode_parameters` stores parameters the way the
reference does: strings, numbers, booleans and nulls as JSON scalars, lists and maps as a string
holding their JSON (``"partitionBy":"[\\"p\\"]"``); metrics become decimal strings.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltalog.actions import CommitInfo

ENGINE_INFO = "deltalog/0.1.0"

WRITE_MODES = {
    "append": "Append",
    "overwrite": "Overwrite",
    "error": "ErrorIfExists",
    "errorifexists": "ErrorIfExists",
    "ignore": "Ignore",
}


@dataclass(frozen=True, slots=True)
class Operation:
    """One named operation with its parameters (Python values) and metrics (counts).

    Attributes:
        name: the reference's operation name, e.g. ``WRITE`` or ``CREATE OR REPLACE TABLE``.
        parameters: operation parameters; encoded by :func:`encode_parameters`.
        metrics: operation metrics (``numFiles``...), stored as decimal strings.
    """

    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, int] = field(default_factory=dict)

    def with_metrics(self, metrics: Mapping[str, int]) -> Operation:
        return Operation(self.name, self.parameters, dict(metrics))


def write(
    mode: str,
    partition_by: Sequence[str] = (),
    *,
    predicate: str | None = None,
    dynamic_partition_overwrite: bool = False,
    can_overwrite_schema: bool = False,
    can_merge_schema: bool = False,
    replace_on: str | None = None,
    replace_using: Sequence[str] | None = None,
) -> Operation:
    """``WRITE``: a batch write; optional parameters appear only when set, as in the reference
    (``replaceUsingCols`` as ``"(a, b)"``)."""
    params: dict[str, Any] = {
        "mode": WRITE_MODES.get(mode.lower(), mode),
        "partitionBy": list(partition_by),
    }
    if predicate is not None:
        params["predicate"] = [predicate]
    if dynamic_partition_overwrite:
        params["isDynamicPartitionOverwrite"] = True
    if can_overwrite_schema:
        params["canOverwriteSchema"] = True
    if can_merge_schema:
        params["canMergeSchema"] = True
    if replace_on is not None:
        params["replaceOnCond"] = replace_on
    if replace_using is not None:
        params["replaceUsingCols"] = f"({', '.join(replace_using)})"
    return Operation("WRITE", params)


def create_table(
    kind: str,
    *,
    partition_by: Sequence[str] = (),
    cluster_by: Sequence[str] = (),
    description: str | None = None,
    properties: Mapping[str, str] | None = None,
    is_managed: bool = False,
    as_select: bool = False,
) -> Operation:
    """``CREATE TABLE``, ``REPLACE TABLE`` or ``CREATE OR REPLACE TABLE`` (``kind``), with
    `` AS SELECT`` when the command writes rows too."""
    params: dict[str, Any] = {
        "isManaged": "true" if is_managed else "false",
        "description": description,
        "partitionBy": list(partition_by),
        "properties": dict(properties or {}),
    }
    if cluster_by:
        params["clusterBy"] = list(cluster_by)
    return Operation(kind + (" AS SELECT" if as_select else ""), params)


def delete(predicates: Sequence[str]) -> Operation:
    """``DELETE``: ``predicate`` is the JSON list of the condition's SQL (``[]`` for all rows)."""
    return Operation("DELETE", {"predicate": list(predicates)})


def update(predicate: str | None) -> Operation:
    """``UPDATE``: ``predicate`` is the JSON list of the condition's SQL (``[]`` for all rows)."""
    return Operation("UPDATE", {"predicate": [predicate] if predicate is not None else []})


def streaming_update(output_mode: str, query_id: str, epoch_id: int) -> Operation:
    """``STREAMING UPDATE``: one micro-batch of a streaming write; ``output_mode`` is
    ``Append`` or ``Complete``, ``epoch_id`` the batch id (stored as text, as the reference)."""
    return Operation(
        "STREAMING UPDATE",
        {"outputMode": output_mode, "queryId": query_id, "epochId": str(epoch_id)},
    )


@dataclass(frozen=True, slots=True)
class MergePredicate:
    """One MERGE clause as commitInfo records it: its kind and its condition's SQL."""

    action_type: str
    predicate: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.predicate is not None:
            out["predicate"] = self.predicate
        out["actionType"] = self.action_type
        return out


def merge(
    predicate: str,
    matched: Sequence[MergePredicate],
    not_matched: Sequence[MergePredicate],
    not_matched_by_source: Sequence[MergePredicate],
) -> Operation:
    """``MERGE``: the ON condition and each clause kind's list of clauses (JSON text)."""
    return Operation(
        "MERGE",
        {
            "predicate": [predicate],
            "matchedPredicates": [c.to_json() for c in matched],
            "notMatchedPredicates": [c.to_json() for c in not_matched],
            "notMatchedBySourcePredicates": [c.to_json() for c in not_matched_by_source],
        },
    )


def encode_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as the reference stores them (lists and maps as JSON text)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, list | tuple | dict):
            out[key] = json.dumps(value, separators=(",", ":"))
        else:
            out[key] = value
    return out


def build_commit_info(
    operation: Operation,
    *,
    timestamp: int,
    read_version: int,
    isolation_level: str | None,
    is_blind_append: bool,
    txn_id: str,
    in_commit_timestamp: int | None = None,
    user_metadata: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> CommitInfo:
    """The ``commitInfo`` of one commit attempt (fields in the reference's order)."""
    extra: dict[str, Any] = {}
    if tags:
        extra["tags"] = dict(tags)
    return CommitInfo(
        timestamp=timestamp,
        in_commit_timestamp=in_commit_timestamp,
        operation=operation.name,
        operation_parameters=encode_parameters(operation.parameters),
        read_version=read_version if read_version >= 0 else None,
        isolation_level=isolation_level,
        is_blind_append=is_blind_append,
        operation_metrics={k: str(int(v)) for k, v in operation.metrics.items()} or None,
        user_metadata=user_metadata,
        engine_info=ENGINE_INFO,
        txn_id=txn_id,
        extra=extra,
    )


def new_txn_id() -> str:
    return str(uuid.uuid4())


# -- VACUUM and RESTORE (issue 12) ---------------------------------------------------------------


def vacuum_start(
    retention_check_enabled: bool,
    specified_retention_ms: int | None,
    default_retention_ms: int,
    *,
    num_files_to_delete: int,
    size_of_data_to_delete: int,
) -> Operation:
    """``VACUUM START``: an empty commit before deleting; ``specifiedRetentionMillis`` only
    when a retention was given."""
    params: dict[str, Any] = {
        "retentionCheckEnabled": retention_check_enabled,
        "defaultRetentionMillis": default_retention_ms,
    }
    if specified_retention_ms is not None:
        params["specifiedRetentionMillis"] = specified_retention_ms
    return Operation(
        "VACUUM START",
        params,
        {"numFilesToDelete": num_files_to_delete, "sizeOfDataToDelete": size_of_data_to_delete},
    )


def vacuum_end(num_deleted_files: int | None, num_vacuumed_directories: int | None) -> Operation:
    """``VACUUM END``: ``status`` COMPLETED with the counts, or FAILED (no metrics) when the
    deletes stopped on an error."""
    if num_deleted_files is None or num_vacuumed_directories is None:
        return Operation("VACUUM END", {"status": "FAILED"})
    return Operation(
        "VACUUM END",
        {"status": "COMPLETED"},
        {"numDeletedFiles": num_deleted_files, "numVacuumedDirectories": num_vacuumed_directories},
    )


def restore(version: int | None, timestamp: str | None, metrics: Mapping[str, int]) -> Operation:
    """``RESTORE``: the version or the timestamp text asked for (the other one ``null``)."""
    return Operation("RESTORE", {"version": version, "timestamp": timestamp}, dict(metrics))


def optimize(
    predicates: Sequence[str],
    z_order_by: Sequence[str] = (),
    *,
    auto: bool = False,
    cluster_by: Sequence[str] = (),
) -> Operation:
    """``OPTIMIZE`` (reference ``DeltaOperations.Optimize``): ``predicate`` is the JSON list of
    the partition filters' SQL, ``zOrderBy`` and ``clusterBy`` JSON lists (``zOrderBy`` empty
    when clustering columns are given), ``auto`` true for auto compaction."""
    return Operation(
        "OPTIMIZE",
        {
            "predicate": list(predicates),
            "zOrderBy": [] if cluster_by else list(z_order_by),
            "clusterBy": list(cluster_by),
            "auto": auto,
        },
    )


# -- table management: CONVERT, CLONE, properties, protocol (issue 12) ---------------------------


def convert(
    num_files: int, partition_by: Sequence[str], collect_stats: bool, source_format: str | None
) -> Operation:
    """``CONVERT``: ``sourceFormat`` only when known; metric ``numConvertedFiles``."""
    params: dict[str, Any] = {
        "numFiles": num_files,
        "partitionedBy": list(partition_by),
        "collectStats": collect_stats,
    }
    if source_format is not None:
        params["sourceFormat"] = source_format
    return Operation("CONVERT", params, {"numConvertedFiles": num_files})


def clone(source: str, source_version: int, metrics: Mapping[str, int]) -> Operation:
    """``CLONE``: the source's name and the version cloned."""
    return Operation("CLONE", {"source": source, "sourceVersion": source_version}, dict(metrics))


def set_table_properties(properties: Mapping[str, str]) -> Operation:
    return Operation("SET TBLPROPERTIES", {"properties": dict(properties)})


def unset_table_properties(keys: Sequence[str], if_exists: bool) -> Operation:
    return Operation("UNSET TBLPROPERTIES", {"properties": list(keys), "ifExists": if_exists})


def upgrade_protocol(new_protocol: Mapping[str, Any]) -> Operation:
    """``UPGRADE PROTOCOL``: ``newProtocol`` is the JSON of versions and feature lists."""
    return Operation("UPGRADE PROTOCOL", {"newProtocol": dict(new_protocol)})


def drop_table_feature(feature_name: str, truncate_history: bool) -> Operation:
    return Operation(
        "DROP FEATURE", {"featureName": feature_name, "truncateHistory": truncate_history}
    )


def reorg_purge(predicates: Sequence[str]) -> Operation:
    """``REORG`` with ``APPLY (PURGE)`` (reference ``DeltaOperations.Reorg``)."""
    return Operation("REORG", {"predicate": list(predicates), "applyPurge": True})


def empty_commit() -> Operation:
    """``Empty Commit``: a version with no actions, which DROP FEATURE checkpoints on."""
    return Operation("Empty Commit", {})


def deletion_vector_tombstones() -> Operation:
    """``Deletion Vector Tombstones``: removes naming deletion-vector files, so that VACUUM
    may delete them once the table no longer supports deletion vectors."""
    return Operation("Deletion Vector Tombstones", {})
