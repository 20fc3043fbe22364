"""Creating and replacing tables (reference ``CreateDeltaTableCommand``), engine-free.

``create`` fails on an existing table, ``create_if_not_exists`` leaves it alone, ``replace``
needs one, ``create_or_replace`` takes either. A replace removes every live file and commits
the new schema, partitioning and properties under the same table id; its protocol only goes up.
The protocol is chosen from the properties and the schema at commit
(:func:`deltalog.features.protocol_for_table`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deltalog import errors
from deltalog.actions import Action, DomainMetadata, Metadata, remove_action
from deltalog.commands.write.identity import START as IDENTITY_START
from deltalog.delta_log import DeltaLog
from deltalog.schema import DataType, StructType, simple_string
from deltalog.skipping_columns import check_clustering_columns
from deltalog.table_properties import TableProperties, validate_new_properties
from deltalog.txn import operations
from deltalog.txn.transaction import Transaction
from deltalog.write.schema_evolution import assign_column_mapping, check_partition_columns
from deltalog.write.stats import stats_columns

KINDS = {
    "create": "CREATE TABLE",
    "create_if_not_exists": "CREATE TABLE",
    "replace": "REPLACE TABLE",
    "create_or_replace": "CREATE OR REPLACE TABLE",
}
CLUSTERING_DOMAIN = "delta.clustering"


@dataclass(frozen=True, slots=True)
class TableSpec:
    """What a new table is: schema, partitioning or clustering, properties, description."""

    schema: StructType
    partition_columns: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None
    name: str | None = None


def create_table(path: str, kind: str, spec: TableSpec) -> int | None:
    """Create or replace the table at ``path`` as ``kind`` says; returns the committed version
    (``None`` when ``create_if_not_exists`` found a table).

    Raises:
        DeltaWriteError: the table exists (``create``), is missing (``replace``), the location
            holds other files, or the spec is invalid (partition columns, properties).
    """
    if kind not in KINDS:
        raise errors.invalid_argument(f"unknown create kind {kind!r}", table=path)
    log = DeltaLog.for_table(path)
    txn = log.start_transaction()
    exists = txn.snapshot is not None
    table = log.table_root
    if exists and kind == "create_if_not_exists":
        return None
    if exists and kind == "create":
        raise errors.DeltaWriteError(
            "DELTA_TABLE_ALREADY_EXISTS",
            f"Table {table} already exists.",
            table=table,
            help="use createIfNotExists, replace or createOrReplace.",
        )
    if not exists and kind == "replace":
        raise errors.DeltaWriteError(
            "DELTA_CANNOT_REPLACE_MISSING_TABLE",
            f"Table {table} cannot be replaced as it does not exist.",
            table=table,
            help="use createOrReplace to create it.",
        )
    if not exists:
        _check_empty_location(log)
    metadata, domains = _metadata(txn.snapshot.metadata if txn.snapshot else None, spec, table)
    txn.update_metadata(metadata)
    actions: list[Action] = list(domains)
    if exists:
        now = int(time.time() * 1000)
        files = txn.filter_files(None)
        txn.read_whole_table()
        actions = [remove_action(r, now) for r in files.to_pylist()] + actions
        actions += _dropped_domains(txn, domains)
    operation = operations.create_table(
        KINDS[kind],
        partition_by=metadata.partition_columns,
        cluster_by=spec.cluster_by,
        description=spec.description,
        properties=metadata.configuration,
    )
    return txn.commit(actions, operation)


def _metadata(
    current: Metadata | None, spec: TableSpec, table: str
) -> tuple[Metadata, list[DomainMetadata]]:
    schema = spec.schema
    partition_columns = tuple(schema.field(c).name for c in spec.partition_columns)
    check_partition_columns(schema, partition_columns, table)
    for name in partition_columns:
        if IDENTITY_START in schema.field(name).metadata:
            raise errors.InvalidArgumentError(
                "DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED",
                f"PARTITIONED BY IDENTITY column {name} is not supported.",
                table=table,
            )
    if spec.cluster_by and partition_columns:
        raise errors.InvalidArgumentError(
            "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY",
            "Clustering and partitioning cannot both be specified.",
            table=table,
        )
    configuration = validate_new_properties(spec.configuration, table)
    domains: list[DomainMetadata] = []
    if spec.cluster_by:
        fields = [schema.field(c) for c in spec.cluster_by]
        check_clustering_stats(schema, configuration, [((f.name,), f.type) for f in fields], table)
        columns = [[schema.field(c).name] for c in spec.cluster_by]
        configuration["delta.feature.clustering"] = "supported"
        domains.append(
            DomainMetadata(
                CLUSTERING_DOMAIN,
                json.dumps({"clusteringColumns": columns}, separators=(",", ":")),
            )
        )
    mode = TableProperties(configuration, table).column_mapping_mode
    if mode != "none":
        schema, max_id = assign_column_mapping(schema, mode, 0)
        configuration["delta.columnMapping.maxColumnId"] = str(max_id)
    metadata = Metadata(
        id=current.id if current is not None else str(uuid.uuid4()),
        schema_string=schema.to_json(),
        partition_columns=partition_columns,
        configuration=configuration,
        name=spec.name,
        description=spec.description,
        created_time=int(time.time() * 1000),
    )
    return metadata, domains


def _dropped_domains(txn: object, kept: Sequence[DomainMetadata]) -> list[DomainMetadata]:
    """A replace drops the old clustering domain when the new table is not clustered."""
    assert isinstance(txn, Transaction) and txn.snapshot is not None
    names = {d.domain for d in kept}
    return [
        DomainMetadata(d.domain, d.configuration, removed=True)
        for d in txn.snapshot.domain_metadata
        if d.domain == CLUSTERING_DOMAIN and d.domain not in names
    ]


def _check_empty_location(log: DeltaLog) -> None:
    """A new table may not be created over other files (an empty ``_delta_log`` is fine)."""
    root = log.table_root
    for info in log.store.list_recursive(root):
        relative = info.path[len(root) :].lstrip("/")
        if relative.startswith(("_delta_log/", ".")) or "/." in relative:
            continue
        raise errors.DeltaWriteError(
            "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
            f"Cannot create table ('{root}'). The associated location ('{root}') is not empty "
            "and also not a Delta table.",
            table=root,
            help="choose an empty location, or convert the existing files to Delta first.",
        )


def check_clustering_stats(
    schema: StructType,
    configuration: Mapping[str, str],
    columns: Sequence[tuple[tuple[str, ...], DataType]],
    table: str,
) -> None:
    """Refuse clustering ``columns`` (each a path of logical names and its type) that would get
    no min/max statistics under ``configuration`` (``check_clustering_columns``).

    Raises:
        InvalidArgumentError: ``DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED``,
            ``DELTA_CLUSTERING_COLUMN_MISSING_STATS``.
    """
    leaves = [c for c in stats_columns(schema, (), configuration) if c.has_min_max]
    described = "\n".join(f" |-- {'.'.join(c.path)}: {simple_string(c.data_type)}" for c in leaves)
    check_clustering_columns(columns, [c.path for c in leaves], described, table)
