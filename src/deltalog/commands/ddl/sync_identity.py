"""``ALTER TABLE t ALTER COLUMN c SYNC IDENTITY``, engine-free (reference
``AlterTableChangeColumnDeltaCommand`` with ``syncIdentity``, ``IdentityColumn.syncIdentity``).

The identity column's high-water mark is set from the values the table holds (the highest one
in the step's direction), made valid for the column's start and step. It only moves forward,
unless ``allow_lowering`` (delta-spark's
``spark.databricks.delta.identityColumn.allowSyncIdentityToLowerHighWaterMark.enabled``), which
repairs a mark set too high. One metadata commit, ``CHANGE COLUMN``, tagged as an identity-only
update (``delta.identity.schemaUpdate``), that read the whole table: a concurrent write of rows
conflicts.

Which value the table holds is the engine's question: :func:`sync_identity` takes a function
that answers it for the snapshot the command read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from deltalog import errors
from deltalog.commands.ddl.alter_columns import column_field, field_map, start_alter
from deltalog.commands.write.identity import identity_columns, with_high_water_marks
from deltalog.log.snapshot import Snapshot
from deltalog.storage.base import LogStore
from deltalog.txn.operations import Operation

# The highest (step > 0) or lowest (step < 0) value of a column in a snapshot; None if empty.
Extreme = Callable[[Snapshot, str, bool], "int | None"]


def sync_identity(
    path: str,
    column: str,
    extreme: Extreme,
    *,
    allow_lowering: bool = False,
    store: LogStore | None = None,
) -> int:
    """Commit the identity column ``column``'s synced high-water mark; returns the version.
    ``extreme(snapshot, name, highest)`` gives the column's highest (or lowest) value in the
    snapshot read.

    Raises:
        InvalidArgumentError: ``DELTA_COLUMN_NOT_FOUND_IN_SCHEMA``.
        DeltaWriteError: ``DELTA_IDENTITY_COLUMNS_ALTER_NON_IDENTITY_COLUMN``.
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    txn, snapshot = start_alter(path, store)
    table = snapshot.table_root
    field = column_field(snapshot.schema, (column,), table)
    found = [c for c in identity_columns(snapshot.schema) if c.name == field.name]
    if not found:
        raise errors.DeltaWriteError(
            "DELTA_IDENTITY_COLUMNS_ALTER_NON_IDENTITY_COLUMN",
            "ALTER TABLE ALTER COLUMN SYNC IDENTITY cannot be called on non IDENTITY columns "
            f"({field.name}).",
            table=table,
        )
    identity = found[0]
    txn.read_whole_table()
    value = extreme(snapshot, field.name, identity.step > 0)
    schema = snapshot.schema
    if value is not None:
        mark = identity.valid_mark(value, allow_lowering=allow_lowering)
        if mark is not None:
            schema = with_high_water_marks(schema, {field.name: mark})
    txn.update_metadata(replace(snapshot.metadata, schema_string=schema.to_json()))
    params = {"column": field_map((), schema.field(field.name))}
    txn.identity_only_update = True
    return txn.commit([], Operation("CHANGE COLUMN", params))
