"""DROP FEATURE ``typeWidening`` while it is in use: the reference's
``TypeWideningPreDowngradeCommand``. Pure core.

1. ``delta.enableTypeWidening`` is unset, so no new type change lands meanwhile.
2. When the schema still records type changes (``delta.typeChanges`` field metadata), every
   live file whose parquet types differ from the table's physical schema (the files written
   before the last change) is rewritten with the table's types: read (widened on read), written
   anew, committed as ``REORG`` with ``dataChange=false`` (the reference's
   ``REWRITE_TYPE_WIDENING`` reorg). A file whose footer deltalog cannot map is rewritten too.
3. The ``delta.typeChanges`` metadata is removed from every field (operation ``DROP FEATURE``
   with the changed columns, the reference's ``UpdateColumnMetadata``).

After that the table has no trace of the feature and the drop's downgrade (with history
protection) proceeds as for the other reader-writer features.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.commands.ddl.protocol_change import unset_table_properties
from deltalog.commands.optimize import commit as opt_commit
from deltalog.commands.optimize import plan as opt
from deltalog.commands.optimize.arrow import keeps_row_ids, write_bins
from deltalog.data_files import physical_schema
from deltalog.delta_log import DeltaLog
from deltalog.log.snapshot import Snapshot
from deltalog.paths import resolve
from deltalog.schema import StructType, schema_from_arrow, simple_string
from deltalog.txn import operations

TYPE_CHANGES_KEY = "delta.typeChanges"
ENABLE_KEY = "delta.enableTypeWidening"


def remove_type_widening(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    """Remove the traces of type widening (see the module docstring); whether anything was
    changed (so a truncating drop must wait for the retention)."""
    changed = False
    if ENABLE_KEY in snapshot.metadata.configuration:
        unset_table_properties(
            delta_log.table_root, [ENABLE_KEY], if_exists=True, store=delta_log.store
        )
        changed = True
    if not has_type_changes(snapshot.metadata.schema_string):
        return changed
    rewrite_narrow_files(delta_log)
    _remove_type_change_metadata(delta_log)
    return True


def has_type_changes(schema_string: str | None) -> bool:
    """Whether any field of the schema JSON carries ``delta.typeChanges`` metadata."""
    return bool(_changed_columns(json.loads(schema_string or '{"fields": []}'), [], strip=False))


def narrow_files(snapshot: Snapshot) -> pa.Table:
    """The live ``add`` rows whose parquet column types differ from the table's physical
    schema (columns absent from a file do not count: they are read as nulls)."""
    expected = _types(
        schema_from_arrow(
            physical_schema(snapshot.schema.fields, snapshot.column_mapping_mode),
            snapshot.table_root,
        )
    )
    files = snapshot.all_files_arrow()
    keep = []
    for path in files.column("path").to_pylist():
        try:
            arrow_schema = pq.read_schema(resolve(snapshot.table_root, path))
            found = _types(schema_from_arrow(arrow_schema, snapshot.table_root))
        except (errors.DeltaError, pa.ArrowException, ValueError):
            keep.append(True)  # a footer deltalog cannot map: rewrite it to be sure
            continue
        keep.append(any(expected.get(n) not in (None, t) for n, t in found.items()))
    return files.filter(pa.array(keep, pa.bool_()))


def rewrite_narrow_files(delta_log: DeltaLog) -> int:
    """Rewrite the files :func:`narrow_files` finds, in one ``REORG`` commit; how many."""
    txn = delta_log.start_transaction()
    assert txn.snapshot is not None
    files = narrow_files(txn.snapshot)
    if files.num_rows == 0:
        return 0
    plan = opt.plan_rewrite(txn.snapshot, files)
    plan.track_reads(txn)
    adds = write_bins(plan, delta_log.store)
    txn.row_tracking_preserved = keeps_row_ids(plan.snapshot)
    removes = opt_commit.remove_actions(files, int(time.time() * 1000))
    op = operations.Operation("REORG", {"predicate": [], "applyPurge": False})
    metrics = opt_commit.commit_metrics(adds, removes)
    opt_commit.commit(delta_log, txn, plan, [*removes, *adds], op.with_metrics(metrics))
    return files.num_rows


def _remove_type_change_metadata(delta_log: DeltaLog) -> None:
    txn = delta_log.start_transaction()
    snapshot = txn.snapshot
    assert snapshot is not None
    schema = json.loads(snapshot.metadata.schema_string or "{}")
    changed = _changed_columns(schema, [], strip=True)
    if not changed:
        return
    txn.update_metadata(replace(snapshot.metadata, schema_string=json.dumps(schema)))
    txn.commit([], operations.Operation("DROP FEATURE", {"columns": json.dumps(changed)}))


def _changed_columns(node: Any, path: list[str], *, strip: bool) -> list[dict[str, Any]]:
    """Fields of the schema JSON ``node`` with type-change metadata, as ``{"name": dotted
    path, "typeChanges": ...}``; with ``strip`` the metadata is removed in place."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for field in node.get("fields") or []:
            here = [*path, field["name"]]
            meta = field.get("metadata") or {}
            if TYPE_CHANGES_KEY in meta:
                out.append({"name": ".".join(here), "typeChanges": meta[TYPE_CHANGES_KEY]})
                if strip:
                    del meta[TYPE_CHANGES_KEY]
            out += _changed_columns(field.get("type"), here, strip=strip)
        for key in ("elementType", "keyType", "valueType"):
            if key in node:
                out += _changed_columns(node[key], path, strip=strip)
    return out


def _types(schema: StructType) -> dict[str, str]:
    return {f.name: simple_string(f.type) for f in schema.fields}
