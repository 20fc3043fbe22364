"""DROP FEATURE ``columnMapping`` while it is in use: the reference's
``ColumnMappingPreDowngradeCommand`` / ``RemoveColumnMappingCommand``. Pure core.

Files under column mapping name their columns by physical names (``col-<uuid>``); a reader
without the feature reads them by the schema's names. So, in one commit (operation
``REMOVE COLUMN MAPPING``):

* the metadata gets ``delta.columnMapping.mode=none``, loses ``delta.columnMapping.maxColumnId``
  and every field's column-mapping metadata (ids, physical names);
* every live file is rewritten with the logical names (deletion vectors applied, fresh
  statistics, partition values keyed by logical names), ``dataChange=false``, and removed.

Refused (``DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING``) when a column name holds
a character parquet names cannot (`` ,;{}()\\n\\t=``). A concurrent commit that touches the files
fails the commit as any rewrite does. The protected downgrade follows (drop_feature).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from deltalog import row_tracking
from deltalog.actions import DomainMetadata
from deltalog.commands.ddl.create_table import CLUSTERING_DOMAIN
from deltalog.commands.optimize.arrow import read_live_rows
from deltalog.commands.optimize.commit import remove_actions
from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.log.snapshot import Snapshot
from deltalog.paths import resolve
from deltalog.schema import ArrayType, DataType, MapType, StructType, drop_column_mapping_metadata
from deltalog.txn import operations
from deltalog.write.file_writer import DataFileWriter, WriteLayout

INVALID_CHARACTERS = " ,;{}()\n\t="
_CONF_REMOVED = ("delta.columnMapping.maxColumnId",)


def remove_column_mapping(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    """Rewrite the table without column mapping (see the module docstring); whether anything
    was changed.

    Raises:
        DeltaWriteError: ``DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING``.
    """
    if not in_use(snapshot):
        return False
    bad = invalid_names(snapshot.schema)
    if bad:
        raise manage_errors.invalid_column_names_when_removing_column_mapping(
            snapshot.table_root, bad
        )
    txn = delta_log.start_transaction()
    current = txn.snapshot
    assert current is not None
    schema = drop_column_mapping_metadata(current.schema)
    conf = {k: v for k, v in current.metadata.configuration.items() if k not in _CONF_REMOVED}
    conf["delta.columnMapping.mode"] = "none"
    # Row tracking enabled: the rows keep their ids and commit versions.
    tracking = row_tracking.materialized_columns(current.protocol, current.metadata)
    layout = replace(
        WriteLayout.of(current, data_change=False),
        schema=schema,
        column_mapping_mode="none",
        configuration=conf,
        carried_columns=tracking.names if tracking is not None else (),
    )
    files = current.all_files_arrow()
    adds = []
    with DataFileWriter(delta_log.store, layout) as writer:
        for row in files.to_pylist():
            writer.add(read_live_rows(current, delta_log.store, row, tracking))
        adds = writer.finish()
    txn.row_tracking_preserved = tracking is not None
    removes = remove_actions(files, int(time.time() * 1000))
    txn.update_metadata(
        replace(current.metadata, schema_string=schema.to_json(), configuration=conf)
    )
    txn.read_whole_table()
    domains = _clustering_by_logical_names(current)
    try:
        txn.commit([*removes, *adds, *domains], operations.Operation("REMOVE COLUMN MAPPING", {}))
    except BaseException:
        for add in adds:
            delta_log.store.delete(resolve(current.table_root, add.path))
        raise
    return True


def _clustering_by_logical_names(snapshot: Snapshot) -> list[DomainMetadata]:
    """The ``delta.clustering`` domain with its columns renamed from physical to logical names
    (the reference records physical names under column mapping); empty when unclustered."""
    domain = next((d for d in snapshot.domain_metadata if d.domain == CLUSTERING_DOMAIN), None)
    if domain is None or not domain.configuration:
        return []
    config = json.loads(domain.configuration)
    renamed = []
    for parts in config.get("clusteringColumns") or []:
        names: list[str] = []
        struct: Any = snapshot.schema
        for part in parts if isinstance(parts, list) else [parts]:
            field = None
            if isinstance(struct, StructType):
                field = next((f for f in struct.fields if f.physical_name == part), None)
            names.append(field.name if field is not None else part)
            struct = field.type if field is not None else None
        renamed.append(names)
    config["clusteringColumns"] = renamed
    return [DomainMetadata(CLUSTERING_DOMAIN, json.dumps(config))]


def in_use(snapshot: Snapshot) -> bool:
    """Whether the table maps columns (a mode other than ``none``, or mapping metadata left)."""
    return snapshot.column_mapping_mode != "none" or "delta.columnMapping." in (
        snapshot.metadata.schema_string or ""
    )


def invalid_names(schema: StructType) -> list[str]:
    """Dotted names of the fields (at any depth) whose name parquet cannot hold."""
    out: list[str] = []

    def walk(t: DataType, prefix: str) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                name = f"{prefix}{f.name}"
                if any(c in f.name for c in INVALID_CHARACTERS):
                    out.append(name)
                walk(f.type, f"{name}.")
        elif isinstance(t, ArrayType):
            walk(t.element_type, prefix)
        elif isinstance(t, MapType):
            walk(t.key_type, prefix)
            walk(t.value_type, prefix)

    walk(schema, "")
    return out
