"""Schema changes of ALTER TABLE, engine-free (reference ``AlterTableChangeColumnDeltaCommand``,
``AlterTableDropColumnsDeltaCommand``, ``AlterTableClusterByDeltaCommand``).

Each function is one metadata-only commit through :class:`deltalog.txn.Transaction`, so a
concurrent metadata change fails it with ``MetadataChangedException``:

* :func:`change_column` — ``ALTER|CHANGE COLUMN``: comment, position (``FIRST`` /
  ``AFTER c``), ``DROP NOT NULL``, ``SET|DROP DEFAULT``, and a type change that type
  widening allows (the table has ``delta.enableTypeWidening=true``; recorded in
  ``delta.typeChanges``). Commits
  ``CHANGE COLUMN``.
* :func:`rename_column` — ``RENAME COLUMN``; needs column mapping (``name``/``id``) because data
  files keep the physical name. Commits ``RENAME COLUMN``.
* :func:`drop_columns` — ``DROP COLUMN(S)``; needs column mapping, files keep the dropped data.
  Commits ``DROP COLUMNS``.
* :func:`cluster_by` — ``CLUSTER BY (cols)`` / ``CLUSTER BY NONE``: the ``delta.clustering``
  domain. Commits ``CLUSTER BY``.

Partition columns cannot be dropped or changed; columns that CHECK constraints or generated
columns refer to cannot be renamed, dropped or retyped (as in the reference).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from deltalog.actions import DomainMetadata
from deltalog.column_defaults import CURRENT_DEFAULT
from deltalog.commands.ddl.create_table import CLUSTERING_DOMAIN, check_clustering_stats
from deltalog.commands.optimize.plan import clustering_columns
from deltalog.commands.write.identity import START as IDENTITY_START
from deltalog.delta_log import DeltaLog
from deltalog.errors import DeltaWriteError, TableNotFoundError
from deltalog.errors import alter as alter_errors
from deltalog.features import is_feature_supported
from deltalog.log.snapshot import Snapshot
from deltalog.schema import (
    DataType,
    DecimalType,
    PrimitiveType,
    StructField,
    StructType,
    field_at_parts,
    simple_string,
)
from deltalog.skipping_columns import drop_stats_columns, rename_stats_column
from deltalog.storage.base import LogStore
from deltalog.table_properties import TableProperties
from deltalog.txn.operations import Operation
from deltalog.txn.transaction import Transaction
from deltalog.write.type_widening import (
    PREVIEW_FEATURE,
    is_enabled,
    is_type_change_supported,
    record_field_changes,
)

COMMENT_KEY = "comment"
GENERATION_KEY = "delta.generationExpression"
CONSTRAINT_PREFIX = "delta.constraints."
MAX_CLUSTERING_COLUMNS = 4

ColumnPath = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """What ``ALTER TABLE t ALTER COLUMN column ...`` asks for; ``None`` leaves a part as is.

    Attributes:
        column: the column's path (``("s", "x")`` for a nested field).
        data_type: the new type.
        comment: the new comment.
        position: ``"FIRST"`` or ``"AFTER <sibling>"``.
        nullable: ``True`` for DROP NOT NULL, ``False`` for SET NOT NULL (refused).
        default: SET DEFAULT's SQL text (the column's ``CURRENT_DEFAULT``).
        drop_default: DROP DEFAULT.
    """

    column: ColumnPath
    data_type: DataType | None = None
    comment: str | None = None
    position: str | None = None
    nullable: bool | None = None
    default: str | None = None
    drop_default: bool = False


def change_column(path: str, change: ColumnChange, *, store: LogStore | None = None) -> int:
    """Commit ``CHANGE COLUMN``; returns the version. A default set on a table whose protocol
    does not support ``allowColumnDefaults`` is refused at commit
    (``WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED``, as in the reference).

    Raises:
        InvalidArgumentError: ``DELTA_COLUMN_NOT_FOUND_IN_SCHEMA`` (column or AFTER sibling).
        DeltaWriteError: ``DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP`` (SET NOT NULL, a type
            change type widening does not allow or the table has not enabled), a type change of
            a struct/map/array, or one of a column constraints or generated columns use.
    """
    txn, snapshot = start_alter(path, store)
    table = snapshot.table_root
    schema = snapshot.schema
    old = column_field(schema, change.column, table)
    _check_identity_change(old, change, table)
    new = old
    if change.comment is not None:
        new = replace(new, metadata={**new.metadata, COMMENT_KEY: change.comment})
    if change.nullable is not None and change.nullable != old.nullable:
        if not change.nullable:
            raise alter_errors.change_column_not_supported(
                table,
                _dotted(change.column),
                _describe(old),
                _describe(replace(old, nullable=False)),
            )
        new = replace(new, nullable=True)
    if change.data_type is not None and change.data_type != old.type:
        new = _retype(snapshot, change.column, old, new, change.data_type)
    if change.default is not None:
        new = replace(new, metadata={**new.metadata, CURRENT_DEFAULT: change.default})
    elif change.drop_default and CURRENT_DEFAULT in new.metadata:
        new = replace(new, metadata={k: v for k, v in new.metadata.items() if k != CURRENT_DEFAULT})
    schema = _update_struct(schema, change.column[:-1], lambda s: _put(s, old, new, change, table))
    txn.update_metadata(replace(snapshot.metadata, schema_string=schema.to_json()))
    params: dict[str, object] = {"column": field_map(change.column[:-1], new)}
    if change.position is not None:
        params["position"] = change.position
    return txn.commit([], Operation("CHANGE COLUMN", params))


def _check_identity_change(old: StructField, change: ColumnChange, table: str) -> None:
    """An identity column takes only comment and position changes here (and RENAME, SYNC
    IDENTITY), as the reference's catalog allows.

    Raises:
        DeltaWriteError: ``DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED``.
    """
    if IDENTITY_START not in old.metadata:
        return
    changes = (change.data_type, change.nullable, change.default)
    if any(c is not None for c in changes) or change.drop_default:
        raise DeltaWriteError(
            "DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED",
            f"ALTER TABLE ALTER COLUMN is not supported for IDENTITY columns ({old.name}).",
            table=table,
        )


def rename_column(
    path: str, column: Sequence[str], new_name: str, *, store: LogStore | None = None
) -> int:
    """Commit ``RENAME COLUMN``; a partition column's entry in ``partitionColumns`` follows.

    Raises:
        UnsupportedFeatureError: ``DELTA_UNSUPPORTED_RENAME_COLUMN`` without column mapping.
        DeltaWriteError: the new name is taken; a constraint or generated column uses it.
    """
    txn, snapshot = start_alter(path, store)
    table = snapshot.table_root
    if _mapping_mode(snapshot) == "none":
        raise alter_errors.rename_column_not_supported(table)
    column = tuple(column)
    schema = snapshot.schema  # one parse: fields are matched by identity below
    old = column_field(schema, column, table)
    _check_dependents(snapshot, column)
    parent = _struct_at(schema, column[:-1], table)
    if new_name.lower() != old.name.lower() and any(
        f.name.lower() == new_name.lower() for f in parent.fields
    ):
        raise alter_errors.duplicate_column(table, _dotted((*column[:-1], new_name)))
    renamed = replace(old, name=new_name)
    schema = _update_struct(
        schema,
        column[:-1],
        lambda s: StructType(tuple(renamed if f is old else f for f in s.fields)),
    )
    partitions = snapshot.metadata.partition_columns
    if len(column) == 1:
        partitions = tuple(new_name if p.lower() == old.name.lower() else p for p in partitions)
    new_path = (*column[:-1], new_name)
    configuration = rename_stats_column(snapshot.metadata.configuration, column, new_path)
    txn.update_metadata(
        replace(
            snapshot.metadata,
            schema_string=schema.to_json(),
            partition_columns=partitions,
            configuration=configuration,
        )
    )
    params = {"oldColumnPath": _dotted(column), "newColumnPath": _dotted((*column[:-1], new_name))}
    return txn.commit([], Operation("RENAME COLUMN", params))


def drop_columns(
    path: str,
    columns: Sequence[Sequence[str]],
    *,
    if_exists: bool = False,
    store: LogStore | None = None,
) -> int | None:
    """Commit ``DROP COLUMNS``; ``None`` (no commit) when ``if_exists`` and none exists.

    Raises:
        UnsupportedFeatureError: ``DELTA_UNSUPPORTED_DROP_COLUMN`` without column mapping.
        DeltaWriteError: a partition or clustering column, the table's only column, a column a
            constraint or generated column uses.
        InvalidArgumentError: ``DELTA_COLUMN_NOT_FOUND_IN_SCHEMA`` unless ``if_exists``.
    """
    txn, snapshot = start_alter(path, store)
    table = snapshot.table_root
    if _mapping_mode(snapshot) == "none":
        raise alter_errors.drop_column_not_supported(table)
    schema = snapshot.schema
    dropped: list[ColumnPath] = []
    for column in map(tuple, columns):
        if if_exists and field_at_parts(schema, column) is None:
            continue
        f = column_field(schema, column, table)
        if len(column) == 1 and len(schema.fields) == 1:
            raise alter_errors.drop_only_column(table, schema.to_json())
        schema = _update_struct(schema, column[:-1], _without(f))
        dropped.append((*column[:-1], f.name))
    if not dropped:
        return None
    names = {_dotted(c).lower() for c in dropped}
    partitions = [p for p in snapshot.metadata.partition_columns if p.lower() in names]
    if partitions:
        raise alter_errors.drop_partition_column(table, partitions)
    clustered = [c for c in clustering_columns(snapshot) if c.lower() in names]
    if clustered:
        raise alter_errors.drop_clustering_column(table, clustered)
    for column in dropped:
        _check_dependents(snapshot, column)
    configuration = drop_stats_columns(snapshot.metadata.configuration, dropped)
    txn.update_metadata(
        replace(snapshot.metadata, schema_string=schema.to_json(), configuration=configuration)
    )
    return txn.commit([], Operation("DROP COLUMNS", {"columns": [_dotted(c) for c in dropped]}))


def cluster_by(
    path: str, columns: Sequence[str] | None, *, store: LogStore | None = None
) -> int | None:
    """Commit ``CLUSTER BY``: the table's clustering columns become ``columns`` (``None`` or
    empty: CLUSTER BY NONE, which on a table never clustered commits nothing and returns
    ``None``). A table that was not clustered gains the ``clustering`` feature.

    Raises:
        DeltaWriteError: the table is partitioned.
        InvalidArgumentError: more than four columns, or a column not in the schema.
    """
    txn, snapshot = start_alter(path, store)
    table = snapshot.table_root
    wanted = list(columns or ())
    if len(wanted) > MAX_CLUSTERING_COLUMNS:
        raise alter_errors.too_many_clustering_columns(table, len(wanted), MAX_CLUSTERING_COLUMNS)
    clustered = any(d.domain == CLUSTERING_DOMAIN for d in snapshot.domain_metadata)
    if not wanted and not clustered:
        return None
    if snapshot.metadata.partition_columns:
        raise alter_errors.cluster_by_on_partitioned_table(table)
    fields = [column_field(snapshot.schema, tuple(c.split(".")), table) for c in wanted]
    check_clustering_stats(
        snapshot.schema,
        snapshot.metadata.configuration,
        [(tuple(c.split(".")), f.type) for c, f in zip(wanted, fields, strict=True)],
        table,
    )
    old = ",".join(clustering_columns(snapshot))
    new = ",".join(f.name for f in fields)
    if not clustered:
        conf = {**snapshot.metadata.configuration, "delta.feature.clustering": "supported"}
        txn.update_metadata(replace(snapshot.metadata, configuration=conf))
    # The domain names columns by their physical names, as the reference stores them.
    config = {"clusteringColumns": [[f.physical_name] for f in fields]}
    domain = DomainMetadata(CLUSTERING_DOMAIN, json.dumps(config, separators=(",", ":")))
    params = {"oldClusteringColumns": old, "newClusteringColumns": new}
    return txn.commit([domain], Operation("CLUSTER BY", params))


# -- type widening --------------------------------------------------------------------------

can_widen = is_type_change_supported  # the name ALTER's callers and tests know


def _retype(
    snapshot: Snapshot, column: ColumnPath, old: StructField, new: StructField, to: DataType
) -> StructField:
    table = snapshot.table_root
    if not isinstance(old.type, PrimitiveType | DecimalType):
        kind = type(old.type).__name__.replace("Type", "").lower()
        raise alter_errors.cannot_update_nested_type(table, kind, _dotted(column))
    enabled = is_enabled(snapshot.metadata.configuration)
    void = old.type == PrimitiveType("void")
    if not void and not (enabled and can_widen(old.type, to)):
        raise alter_errors.change_column_not_supported(
            table, _dotted(column), _describe(old), _describe(replace(old, type=to))
        )
    _check_dependents(snapshot, column)
    if void:
        return replace(new, type=to)
    preview = is_feature_supported(snapshot.protocol, PREVIEW_FEATURE)
    version = snapshot.version + 1 if preview else None
    return record_field_changes(replace(new, type=to), old.type, version)


# -- dependents -----------------------------------------------------------------------------

# Identifiers of a SQL expression: string literals are skipped, back-quoted names unquoted.
_IDENT = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`((?:[^`]|``)+)`|([A-Za-z_]\w*)")


def references(expression: str, column: Sequence[str]) -> bool:
    """Whether ``expression`` names ``column`` (or, for a nested path, its top-level column);
    conservative: any identifier spelled like the column counts."""
    wanted = column[0].lower()
    for m in _IDENT.finditer(expression):
        name = m.group(1) or m.group(2)
        if name is not None and name.replace("``", "`").lower() == wanted:
            return True
    return False


def _check_dependents(snapshot: Snapshot, column: ColumnPath) -> None:
    table = snapshot.table_root
    conf = snapshot.metadata.configuration
    used_by = [
        f"{k[len(CONSTRAINT_PREFIX) :]} -> {v}"
        for k, v in conf.items()
        if k.lower().startswith(CONSTRAINT_PREFIX) and references(v, column)
    ]
    if used_by:
        raise alter_errors.dependent_constraints(table, _dotted(column), used_by)
    generated = [
        f"{f.name} -> {f.metadata[GENERATION_KEY]}"
        for f in snapshot.schema.fields
        if GENERATION_KEY in f.metadata and references(str(f.metadata[GENERATION_KEY]), column)
    ]
    if generated:
        raise alter_errors.dependent_generated_columns(table, _dotted(column), generated)


# -- schema paths ---------------------------------------------------------------------------


def start_alter(path: str, store: LogStore | None) -> tuple[Transaction, Snapshot]:
    log = DeltaLog.for_table(path, store=store)
    txn = log.start_transaction()
    if txn.snapshot is None:
        raise TableNotFoundError(
            "DELTA_MISSING_DELTA_TABLE", f"{path} is not a Delta table.", table=log.table_root
        )
    return txn, txn.snapshot


def _mapping_mode(snapshot: Snapshot) -> str:
    return TableProperties(snapshot.metadata.configuration, snapshot.table_root).column_mapping_mode


def column_field(schema: StructType, column: ColumnPath, table: str) -> StructField:
    found = field_at_parts(schema, column) if column else None
    if found is None:
        raise alter_errors.column_not_found(table, _dotted(column), schema.to_json())
    return found


def _struct_at(schema: StructType, parent: ColumnPath, table: str) -> StructType:
    if not parent:
        return schema
    f = column_field(schema, parent, table)
    if not isinstance(f.type, StructType):
        raise alter_errors.column_not_found(table, _dotted(parent), schema.to_json())
    return f.type


def _update_struct(
    schema: StructType, parent: ColumnPath, fn: Callable[[StructType], StructType]
) -> StructType:
    """``schema`` with the struct at ``parent`` (a path of struct fields) replaced by
    ``fn(struct)``."""
    if not parent:
        return fn(schema)
    head = parent[0].lower()
    fields = []
    for f in schema.fields:
        if f.name.lower() == head and isinstance(f.type, StructType):
            f = replace(f, type=_update_struct(f.type, parent[1:], fn))
        fields.append(f)
    return StructType(tuple(fields))


def _without(field: StructField) -> Callable[[StructType], StructType]:
    return lambda struct: StructType(tuple(f for f in struct.fields if f is not field))


def _put(
    struct: StructType, old: StructField, new: StructField, change: ColumnChange, table: str
) -> StructType:
    """``struct`` with ``old`` replaced by ``new``, moved to ``change.position``."""
    fields = [new if f is old else f for f in struct.fields]
    position = (change.position or "").strip()
    if not position:
        return StructType(tuple(fields))
    start = fields.index(new)
    rest = [f for f in fields if f is not new]
    if position.upper() == "FIRST":
        return StructType((new, *rest))
    after = position.split(None, 1)[1].strip("`") if " " in position else ""
    if after.lower() == old.name.lower():
        index = start
    else:
        index = next((i + 1 for i, f in enumerate(rest) if f.name.lower() == after.lower()), -1)
        if index < 0:
            raise alter_errors.column_not_found(table, after, struct.to_json())
    return StructType((*rest[:index], new, *rest[index:]))


def _dotted(column: Sequence[str]) -> str:
    return ".".join(f"`{p}`" if "." in p else p for p in column)


def _describe(f: StructField) -> str:
    return (
        f"StructField({f.name},{simple_string(f.type)},{str(f.nullable).lower()})"
        if f.metadata.get(COMMENT_KEY) is None
        else f"StructField({f.name},{simple_string(f.type)},{str(f.nullable).lower()},"
        f"comment={f.metadata[COMMENT_KEY]})"
    )


def field_map(parent: ColumnPath, f: StructField) -> Mapping[str, object]:
    """The ``column`` parameter of ``CHANGE COLUMN``, as the reference's ``structFieldToMap``."""
    schema_json = json.loads(StructType((f,)).to_json())["fields"][0]
    type_json = schema_json["type"]
    return {
        "name": _dotted((*parent, f.name)),
        "type": type_json if isinstance(type_json, str) else type_json["type"],
        "nullable": f.nullable,
        "metadata": f.metadata,
    }
