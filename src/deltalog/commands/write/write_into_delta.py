"""A batch write into a Delta table (reference ``WriteIntoDelta``), engine-free.

Both writers run the same three steps and differ only in who writes the data files:

1. :func:`prepare_write` opens a transaction and decides everything the data does not change:
   the mode against the table's existence, idempotence (``txnAppId``/``txnVersion``), the
   schema (create, merge or overwrite it), the partitioning, the layout of the files to write.
   Refusals happen here, before a byte is written.
2. The caller writes data files with :class:`~deltalog.write.file_writer.DataFileWriter` (on the
   driver for :func:`deltalog.write_table`, in Spark tasks for ``df.write.format("delta")``).
3. :func:`commit_write` chooses what the write replaces (everything on overwrite, the
   ``replaceWhere`` rows, or the partitions written under dynamic partition overwrite), builds
   the operation and its metrics and commits once.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltalog import errors
from deltalog.actions import (
    ADD_SCHEMA,
    Action,
    AddFile,
    Metadata,
    RemoveFile,
    SetTransaction,
    remove_action,
)
from deltalog.commands.write.identity import with_high_water_marks
from deltalog.commands.write.rewrite import rewrite_without
from deltalog.features import check_write_supported, is_feature_supported
from deltalog.scan.predicate import (
    Opaque,
    Predicate,
    PredicateSyntaxError,
    columns,
    has_opaque,
    parse_predicate,
)
from deltalog.scan.row_filter import partition_matches, typed_partitions
from deltalog.schema import (
    PrimitiveType,
    StructField,
    StructType,
    as_nullable,
    drop_column_mapping_metadata,
    parse_schema,
)
from deltalog.table_properties import TableProperties, validate_new_properties
from deltalog.txn import operations
from deltalog.write.file_writer import (
    MATERIALIZE_PARTITION_COLUMNS,
    MATERIALIZE_PROPERTY,
    WriteLayout,
    writes_partition_columns,
)
from deltalog.write.schema_evolution import (
    assign_column_mapping,
    check_partition_columns,
    merge_schema,
)
from deltalog.write.type_widening import (
    PREVIEW_FEATURE,
    is_enabled,
    record_type_changes,
    widening_mode,
)

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog
    from deltalog.log.snapshot import Snapshot
    from deltalog.txn.transaction import Transaction

MODES = ("append", "overwrite", "errorifexists", "error", "ignore", "default")


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a batch write was asked to do (delta-spark's writer options, typed).

    Attributes:
        mode: ``append``, ``overwrite``, ``errorifexists`` (``error``/``default``), ``ignore``.
        partition_by: partition columns for a new table (``None``: keep the table's).
        replace_where: with overwrite, replace only the rows matching this SQL condition.
        replace_on: with overwrite, replace the rows some written row meets this SQL condition
            with (delta-spark 4.3's ``replaceOn``; the Spark layer runs it).
        replace_using: with overwrite, replace the rows equal to some written row on these
            columns (``replaceUsing``; NULL keys never match).
        target_alias: the table's alias in ``replace_on`` (``targetAlias``).
        dynamic_partition_overwrite: with overwrite, replace only the partitions written.
        merge_schema: add new columns to the table schema.
        overwrite_schema: with overwrite, replace the schema and partitioning.
        txn_app_id, txn_version: idempotent writes (both or neither).
        user_metadata: ``commitInfo.userMetadata``.
        max_records_per_file: rows per file at most (0: unlimited).
        target_file_size: bytes per file at most, roughly.
        data_change: ``False`` marks the commit as a rearrangement (no CDF, no streaming).
        configuration: table properties for a table this write creates.
        description: the table description for a table this write creates.
        allow_automatic_widening: which type widenings schema evolution applies on a table
            with ``delta.enableTypeWidening`` (``always``, ``same_family_type``, ``never``;
            delta-spark's ``typeWidening.allowAutomaticWidening``).
    """

    mode: str = "errorifexists"
    partition_by: tuple[str, ...] | None = None
    replace_where: str | None = None
    replace_on: str | None = None
    replace_using: tuple[str, ...] | None = None
    target_alias: str | None = None
    dynamic_partition_overwrite: bool = False
    merge_schema: bool = False
    overwrite_schema: bool = False
    txn_app_id: str | None = None
    txn_version: int | None = None
    user_metadata: str | None = None
    max_records_per_file: int = 0
    target_file_size: int = 128 * 1024 * 1024
    data_change: bool = True
    configuration: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None
    allow_automatic_widening: str = "always"

    @property
    def normalized_mode(self) -> str:
        mode = self.mode.lower()
        return "errorifexists" if mode in ("error", "default") else mode


@dataclass(slots=True)
class WritePlan:
    """A prepared write: its transaction, the file layout, and whether to write at all.

    Attributes:
        txn: the transaction the write commits through.
        options: the write's options.
        layout: how data files are written (schema, partitioning, column mapping).
        skip: the write does nothing (``ignore`` on an existing table, or an idempotent write
            already applied); no files should be written and nothing is committed.
        replace_predicate: the parsed ``replaceWhere``, or ``None``.
        operation: the ``WRITE`` operation (metrics are added at commit).
    """

    txn: Transaction
    options: WriteOptions
    layout: WriteLayout
    skip: bool
    replace_predicate: Predicate | None
    operation: operations.Operation
    new_table: bool


def prepare_write(
    log: DeltaLog,
    data_schema: StructType,
    options: WriteOptions,
    *,
    read_version: int | None = None,
) -> WritePlan:
    """Open the transaction (on the latest snapshot, or on ``read_version``'s: see
    :meth:`DeltaLog.start_transaction`) and decide the table's metadata for this write. The
    decisions depend only on the snapshot, ``data_schema`` and ``options``, so a write prepared
    twice on one snapshot gets the same layout.

    Raises:
        DeltaWriteError: the table exists and the mode is ``errorifexists``; the schema or the
            partitioning does not fit the table (without ``mergeSchema``/``overwriteSchema``);
            an overwrite of an append-only table; bad option combinations.
        UnsupportedFeatureError: the table needs a writer feature deltalog does not support.
    """
    _check_options(log.table_root, options)
    txn = log.start_transaction(user_metadata=options.user_metadata, read_version=read_version)
    snapshot = txn.snapshot
    mode = options.normalized_mode
    if snapshot is not None:
        check_write_supported(snapshot.protocol, log.table_root)
    skip = _already_done(txn, options)
    if snapshot is not None and mode == "errorifexists":
        raise errors.DeltaWriteError(
            "DELTA_PATH_EXISTS",
            f"Cannot write to already existent path {log.table_root} without setting "
            "OVERWRITE = 'true'.",
            table=log.table_root,
            help="use mode('append') or mode('overwrite').",
        )
    if snapshot is not None and mode == "ignore":
        skip = True
    metadata = _metadata_for_write(txn, data_schema, options) if not skip else None
    if metadata is not None:
        txn.update_metadata(metadata)
    final = txn.metadata
    assert final is not None or skip
    if mode == "overwrite" and snapshot is not None and not skip:
        _check_overwrite_allowed(txn)
    replace_predicate = (
        _parse_replace_where(log.table_root, options) if mode == "overwrite" else None
    )
    layout = layout_for(txn, options) if final is not None else _empty_layout(log.table_root)
    operation = operations.write(
        "overwrite"
        if mode == "overwrite"
        else ("append" if snapshot is not None or mode == "append" else mode),
        final.partition_columns if final is not None else (),
        predicate=options.replace_where if replace_predicate is not None else None,
        dynamic_partition_overwrite=_is_dynamic(txn, options),
        can_overwrite_schema=options.overwrite_schema and mode == "overwrite",
        can_merge_schema=options.merge_schema,
        replace_on=options.replace_on if mode == "overwrite" else None,
        replace_using=options.replace_using if mode == "overwrite" else None,
    )
    return WritePlan(txn, options, layout, skip, replace_predicate, operation, snapshot is None)


def dml_plan(txn: Transaction, operation: operations.Operation) -> WritePlan:
    """A write plan for the rows a DML command writes into ``txn``'s table (appended files,
    checked against the table's rules; the command commits them itself)."""
    options = WriteOptions(mode="append")
    return WritePlan(txn, options, layout_for(txn, options), False, None, operation, False)


def evolved_metadata(
    txn: Transaction, columns: StructType, allow_automatic_widening: str = "always"
) -> Metadata | None:
    """The metadata after MERGE's schema evolution with the source ``columns`` it writes
    (reference ``ResolveDeltaMergeInto``): new top-level columns are appended (column mapping
    ids assigned), existing ones widened where the table's type widening allows (recorded in
    ``delta.typeChanges``) and otherwise keep their type (Spark casts the values); ``None`` when
    nothing changes."""
    options = WriteOptions(
        mode="append", merge_schema=True, allow_automatic_widening=allow_automatic_widening
    )
    return _metadata_for_write(txn, columns, options, dml=True)


def change_data_layout(layout: WriteLayout) -> WriteLayout:
    """The layout of change data files: the table's columns plus ``_change_type``, under
    ``<table>/_change_data`` with the table's partition directories."""
    mapped = layout.column_mapping_mode != "none"
    metadata = {"delta.columnMapping.physicalName": "_change_type"} if mapped else {}
    change_type = StructField("_change_type", PrimitiveType("string"), True, metadata)
    return replace(
        layout,
        table_root=layout.table_root + "/_change_data",
        schema=StructType((*layout.schema.fields, change_type)),
        data_change=False,
    )


def commit_write(
    plan: WritePlan,
    adds: Sequence[AddFile],
    *,
    removes: Sequence[RemoveFile] = (),
    extra_metrics: Mapping[str, int] | None = None,
    identity_marks: Mapping[str, int] | None = None,
    replaced_rows: Sequence[Action] | None = None,
) -> int | None:
    """Commit the files a prepared write produced, with what it replaces.

    The files an overwrite replaces are chosen here: all of them, those of the partitions
    written (dynamic partition overwrite), or those matching ``replaceWhere`` (whole files on
    partition columns; on data columns the matching rows are rewritten away, copy-on-write);
    ``removes`` are further removals the caller computed; ``identity_marks`` are the identity
    columns' new high-water marks, recorded in the schema in the same commit;
    ``replaced_rows`` are the actions of
    a ``replaceWhere`` the engine ran itself as a DELETE (removes, rewritten files, change
    files: the Spark layer's), so nothing more is replaced here.
    Returns the version, or ``None`` when nothing was committed (skipped, or an append of no
    rows to an existing table).
    """
    if plan.skip:
        return None
    txn, options = plan.txn, plan.options
    if replaced_rows is None and replaces_by_source(plan):
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_REPLACE_ON_OR_USING",
            "replaceOn/replaceUsing overwrites need the Spark layer, which joins the table "
            "with the written rows; this writer cannot.",
            table=plan.layout.table_root,
            help="write through df.write.format('delta'), or use replaceWhere.",
        )
    rewritten: list[Action] = []  # the caller's replacement: files re-added, change files
    if replaced_rows is not None:
        removes = [*removes, *(a for a in replaced_rows if isinstance(a, RemoveFile))]
        rewritten = [a for a in replaced_rows if not isinstance(a, RemoveFile)]
    elif plan.replace_predicate is not None and not replaces_partitions_only(plan):
        rewritten_removes, rewritten_adds, rewrite_metrics = rewrite_without(
            txn, plan.replace_predicate, plan.layout, txn.log.store
        )
        adds = [*rewritten_adds, *adds]
        removes = [*removes, *rewritten_removes]
        extra_metrics = {**rewrite_metrics, **(extra_metrics or {})}
    if identity_marks:
        record_high_water_marks(txn, identity_marks)
    adds = [a for a in adds if _num_records(a) != 0 or a.stats is None]
    if not options.data_change:
        adds = [replace(a, data_change=False) for a in adds]
    replaced = list(removes)
    if replaced_rows is None:
        replaced += _replaced_files(plan, adds)
    if not options.data_change:
        replaced = [replace(r, data_change=False) for r in replaced]
    actions: list[Action] = [*replaced, *rewritten, *adds]
    if options.txn_app_id is not None and options.txn_version is not None:
        actions.append(
            SetTransaction(options.txn_app_id, options.txn_version, int(time.time() * 1000))
        )
    metrics = _metrics(adds, replaced, plan.operation)
    metrics.update(extra_metrics or {})
    if replaced_rows is not None:
        _count_rewritten(metrics, [a for a in rewritten if isinstance(a, AddFile)])
    operation = plan.operation.with_metrics(metrics)
    if plan.new_table or txn.new_metadata is not None:
        return txn.commit(actions, operation)
    return txn.commit_if_needed(actions, operation)


def record_high_water_marks(txn: Transaction, marks: Mapping[str, int]) -> None:
    """Write the identity columns' new high-water marks into this commit's schema (tagged as
    an identity-only update when the transaction changed no other metadata)."""
    if txn.new_metadata is None:
        txn.identity_only_update = True
    metadata = txn.metadata
    assert metadata is not None and metadata.schema_string is not None
    schema = with_high_water_marks(parse_schema(metadata.schema_string), marks)
    txn.update_metadata(replace(metadata, schema_string=schema.to_json()), amend=True)


# -- preparation ---------------------------------------------------------------------------------


def _check_options(table: str, options: WriteOptions) -> None:
    mode = options.mode.lower()
    if mode not in MODES:
        raise errors.invalid_argument(
            f"Unknown save mode {options.mode!r}: use append, overwrite, errorifexists or ignore.",
            table=table,
        )
    if (options.txn_app_id is None) != (options.txn_version is None):
        raise errors.InvalidArgumentError(
            "DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS",
            "Invalid options for idempotent Dataframe writes: both txnAppId and txnVersion must "
            "be given, or neither.",
            table=table,
        )
    if options.txn_version is not None and options.txn_version < 0:
        raise errors.InvalidArgumentError(
            "DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS",
            f"txnVersion must be a non-negative integer, not {options.txn_version}.",
            table=table,
        )
    _check_replace_on_or_using(table, options)
    if options.replace_where is not None and options.dynamic_partition_overwrite:
        raise errors.InvalidArgumentError(
            "DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE",
            "A 'replaceWhere' expression and 'partitionOverwriteMode'='dynamic' cannot both be "
            "set in the DataFrameWriter options.",
            table=table,
        )
    if options.overwrite_schema and options.dynamic_partition_overwrite and mode == "overwrite":
        raise errors.InvalidArgumentError(
            "DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE",
            "'overwriteSchema' cannot be used in dynamic partition overwrite mode.",
            table=table,
        )
    if options.max_records_per_file < 0:
        raise errors.invalid_argument("maxRecordsPerFile must not be negative", table=table)


def _already_done(txn: Transaction, options: WriteOptions) -> bool:
    """An idempotent write whose version the table already has is skipped (the reference
    skips when the recorded version is greater than or equal to the given one)."""
    if options.txn_app_id is None or options.txn_version is None:
        return False
    done = txn.txn_version(options.txn_app_id)
    return done is not None and done >= options.txn_version


def _metadata_for_write(
    txn: Transaction, data_schema: StructType, options: WriteOptions, *, dml: bool = False
) -> Metadata | None:
    """The metadata this write commits: a new table's, a merged or overwritten schema, or
    ``None`` when the table's stays as it is. A merged schema whose types were widened (the
    table enables type widening) records the changes in ``delta.typeChanges``; ``dml`` merges
    as MERGE does (implicit casts, no new nested fields)."""
    table = txn.table_root
    snapshot = txn.snapshot
    mode = options.normalized_mode
    partition_by = tuple(options.partition_by or ())
    if snapshot is None or (mode == "overwrite" and options.overwrite_schema):
        if options.overwrite_schema and options.replace_where is not None:
            raise errors.InvalidArgumentError(
                "DELTA_REPLACE_WHERE_WITH_OVERWRITE_SCHEMA",
                "'overwriteSchema' cannot be combined with 'replaceWhere'.",
                table=table,
            )
        return _new_metadata(txn, data_schema, partition_by, options)
    current = snapshot.metadata
    if options.partition_by is not None and not _same_columns(
        options.partition_by, current.partition_columns
    ):
        raise errors.DeltaWriteError(
            "DELTA_METADATA_MISMATCH",
            "A schema mismatch detected when writing to the Delta table: the partitioning "
            f"{list(options.partition_by)} differs from the table's "
            f"{list(current.partition_columns)}.",
            table=table,
            help="drop .partitionBy(...) to use the table's partitioning, or replace the table "
            "with mode('overwrite').option('overwriteSchema', 'true').",
        )
    table_schema = snapshot.schema
    # New columns join as nullable, as the reference's (its data schema is ``asNullable``):
    # the table's files before this write hold no values for them.
    merged = merge_schema(
        table_schema,
        as_nullable(data_schema),
        merge=options.merge_schema,
        table_root=table,
        overwrite_hint=mode == "overwrite",
        widening=widening_mode(current.configuration, options.allow_automatic_widening, table),
        implicit_conversions=dml,
        nested_fields=not dml,
    )
    if merged == table_schema:
        return None
    if not options.data_change:
        raise _data_change_false(table)
    if is_enabled(current.configuration):
        # A table on the preview feature also records the version (kept when retried).
        preview = is_feature_supported(snapshot.protocol, PREVIEW_FEATURE)
        merged = record_type_changes(
            merged, table_schema, preview_version=txn.read_version + 1 if preview else None
        )
    configuration = dict(current.configuration)
    mode_cm = TableProperties(configuration, table).column_mapping_mode
    if mode_cm != "none":
        max_id = int(configuration.get("delta.columnMapping.maxColumnId", "0"))
        merged, max_id = assign_column_mapping(merged, mode_cm, max_id)
        configuration["delta.columnMapping.maxColumnId"] = str(max_id)
    return replace(current, schema_string=merged.to_json(), configuration=configuration)


def _new_metadata(
    txn: Transaction,
    data_schema: StructType,
    partition_by: tuple[str, ...],
    options: WriteOptions,
) -> Metadata:
    table = txn.table_root
    snapshot = txn.snapshot
    if snapshot is not None and not options.data_change:
        raise _data_change_false(table)
    # A DataFrame write stores every column nullable and never copies another table's column
    # mapping ids or physical names (a DataFrame read from a mapped table carries them).
    schema = drop_column_mapping_metadata(as_nullable(data_schema))
    partition_by = tuple(schema.field(c).name for c in partition_by) if partition_by else ()
    check_partition_columns(schema, partition_by, table)
    if snapshot is None:
        configuration = validate_new_properties(options.configuration, table)
    else:
        configuration = dict(snapshot.metadata.configuration)
    mode_cm = TableProperties(configuration, table).column_mapping_mode
    if mode_cm != "none":
        schema, max_id = assign_column_mapping(schema, mode_cm, 0)
        configuration["delta.columnMapping.maxColumnId"] = str(max_id)
    return Metadata(
        id=snapshot.metadata.id if snapshot is not None else str(uuid.uuid4()),
        schema_string=schema.to_json(),
        partition_columns=partition_by,
        configuration=configuration,
        description=options.description if snapshot is None else snapshot.metadata.description,
        name=snapshot.metadata.name if snapshot is not None else None,
        created_time=int(time.time() * 1000)
        if snapshot is None
        else snapshot.metadata.created_time,
    )


def _check_overwrite_allowed(txn: Transaction) -> None:
    metadata = txn.metadata
    assert metadata is not None
    if TableProperties(metadata.configuration, txn.table_root).append_only:
        raise errors.DeltaWriteError(
            "DELTA_CANNOT_MODIFY_APPEND_ONLY",
            "This table is configured to only allow appends (delta.appendOnly=true); an "
            "overwrite would remove data.",
            table=txn.table_root,
            help="append instead, or ALTER TABLE <table> SET TBLPROPERTIES "
            "(delta.appendOnly=false).",
        )


def replaces_by_source(plan: WritePlan) -> bool:
    """Whether the write overwrites an existing table's rows by ``replaceOn``/``replaceUsing``."""
    options = plan.options
    by_source = options.replace_on is not None or options.replace_using is not None
    return by_source and options.normalized_mode == "overwrite" and not plan.new_table


def _check_replace_on_or_using(table: str, options: WriteOptions) -> None:
    """``replaceOn``/``replaceUsing`` refuse the options they contradict, as the reference's
    ``validateReplaceOnOrUsingOptionCombinations`` does (``partitionOverwriteMode`` is checked
    where options are parsed: only an explicit option is refused)."""
    if options.replace_on is None and options.replace_using is None:
        return
    if options.replace_on is not None and options.replace_using is not None:
        raise _incompatible_options("replaceOn", "replaceUsing", table)
    name = "replaceOn" if options.replace_on is not None else "replaceUsing"
    if options.replace_where is not None:
        raise errors.InvalidArgumentError(
            "DELTA_OVERWRITE_BY_FILTER_INCOMPATIBLE_REPLACE_ON_OR_USING",
            "Overwrite by filter (replaceWhere) is incompatible with the replaceOn/replaceUsing "
            "option.",
            table=table,
            help=f"give either replaceWhere or {name}.",
        )
    if options.overwrite_schema and options.mode.lower() == "overwrite":
        raise _incompatible_options("overwriteSchema", name, table)
    if not options.data_change:
        raise _incompatible_options("dataChange", name, table)


def _incompatible_options(first: str, second: str, table: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS",
        f"The `{first}` option cannot be used with the `{second}` option for Delta tables.",
        table=table,
        help=f"drop one of `{first}` and `{second}`.",
    )


def _parse_replace_where(table: str, options: WriteOptions) -> Predicate | None:
    if options.replace_where is None:
        return None
    try:
        return parse_predicate(options.replace_where)
    except PredicateSyntaxError:
        return Opaque(options.replace_where)


def _is_dynamic(txn: Transaction, options: WriteOptions) -> bool:
    metadata = txn.metadata
    return (
        options.dynamic_partition_overwrite
        and options.normalized_mode == "overwrite"
        and metadata is not None
        and bool(metadata.partition_columns)
    )


def layout_for(txn: Transaction, options: WriteOptions) -> WriteLayout:
    """How ``txn``'s data files are written: the table's schema, partitioning, column mapping
    and properties, as the transaction will leave them."""
    metadata, protocol = txn.metadata, txn.protocol
    assert metadata is not None
    schema = parse_schema(metadata.schema_string) if metadata.schema_string else StructType(())
    cm = TableProperties(metadata.configuration, txn.table_root).column_mapping_mode
    conf = metadata.configuration
    if protocol is not None:
        tight = is_feature_supported(protocol, "deletionVectors")
        materialize = is_feature_supported(protocol, MATERIALIZE_PARTITION_COLUMNS)
    else:  # a new table: its protocol is chosen at commit, from these properties
        tight = conf.get("delta.enableDeletionVectors", "").strip().lower() == "true"
        materialize = conf.get(MATERIALIZE_PROPERTY, "").strip().lower() == "true" or (
            conf.get(f"delta.feature.{MATERIALIZE_PARTITION_COLUMNS}", "").strip().lower()
            in ("supported", "enabled")
        )
    materialize = materialize or writes_partition_columns(conf)
    return WriteLayout(
        table_root=txn.table_root,
        schema=schema,
        partition_columns=tuple(metadata.partition_columns),
        column_mapping_mode=cm,
        configuration=dict(metadata.configuration),
        target_file_size=options.target_file_size,
        max_records_per_file=options.max_records_per_file,
        data_change=options.data_change,
        stats_tight_bounds=tight,
        materialize_partition_columns=materialize,
    )


def _empty_layout(table_root: str) -> WriteLayout:
    return WriteLayout(table_root=table_root, schema=StructType(()), partition_columns=())


def _same_columns(a: Sequence[str], b: Sequence[str]) -> bool:
    return [c.lower() for c in a] == [c.lower() for c in b]


def _data_change_false(table: str) -> errors.DeltaWriteError:
    return errors.DeltaWriteError(
        "DELTA_DATA_CHANGE_FALSE",
        "Cannot change table metadata because the 'dataChange' option is set to false.",
        table=table,
        help="drop the dataChange option, or write data that fits the current schema.",
    )


# -- what a write replaces -----------------------------------------------------------------------


def _replaced_files(plan: WritePlan, adds: Sequence[AddFile]) -> list[RemoveFile]:
    txn, options = plan.txn, plan.options
    if options.normalized_mode != "overwrite" or txn.snapshot is None:
        return []
    now = int(time.time() * 1000)
    if _is_dynamic(txn, options):
        written = set(_partition_keys(txn.snapshot, [dict(a.partition_values) for a in adds]))
        files = txn.filter_files(None) if written else _no_files()
        raw = [dict(pv or []) for pv in files.column("partitionValues").to_pylist()]
        rows = files.to_pylist()
        keys = _partition_keys(txn.snapshot, raw)
        return [remove_action(r, now) for r, k in zip(rows, keys, strict=True) if k in written]
    if plan.replace_predicate is not None:
        # Only the files whose partition values match: data-column conditions are handled by
        # the caller's rewrite (which passes its own removes).
        if not replaces_partitions_only(plan):
            return []
        # Skipping keeps every file that *may* match (the read set); a removal needs the
        # exact answer, per file, from the engine's evaluation of the condition.
        files = txn.filter_files(plan.replace_predicate)
        assert txn.snapshot is not None
        files = files.filter(partition_matches(txn.snapshot, files, plan.replace_predicate))
        return [remove_action(r, now) for r in files.to_pylist()]
    files = txn.filter_files(None)
    txn.read_whole_table()
    return [remove_action(r, now) for r in files.to_pylist()]


def replaces_partitions_only(plan: WritePlan) -> bool:
    """Whether the ``replaceWhere`` names partition columns only (it removes whole files;
    otherwise the matching rows are rewritten away)."""
    predicate = plan.replace_predicate
    if predicate is None or isinstance(predicate, Opaque):
        return False
    parts = {c.lower() for c in plan.layout.partition_columns}
    return (
        bool(parts)
        and all(c.lower() in parts for c in columns(predicate))
        and not has_opaque(predicate)
    )


def _partition_keys(
    snapshot: Snapshot, raw: Sequence[Mapping[str, str | None]]
) -> list[tuple[Any, ...]]:
    """Per file, its partition as typed values: partitions are the same when Spark's ``<=>``
    says so (``1.5`` and ``1.50``, ``-0.0`` and ``0.0``, two NaNs, two NULLs), however each
    writer serialized them."""
    pairs = pa.array([list(r.items()) for r in raw], pa.map_(pa.string(), pa.string()))
    typed = typed_partitions(snapshot, pa.table({"partitionValues": pairs}))
    columns = [[_comparable(v) for v in column.to_pylist()] for column in typed.columns]
    return list(zip(*columns, strict=True))


def _comparable(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value + 0.0  # -0.0 + 0.0 is 0.0
    return value


def _no_files() -> pa.Table:
    return pa.Table.from_batches([], pa.schema(list(ADD_SCHEMA)))


def _num_records(add: AddFile) -> int | None:
    if add.stats is None:
        return None
    value = json.loads(add.stats).get("numRecords")
    return None if value is None else int(value)


def _logical_records(add: AddFile) -> int | None:
    """The file's rows its deletion vector leaves (``None`` without statistics)."""
    n = _num_records(add)
    if n is None or add.deletion_vector is None:
        return n
    return n - add.deletion_vector.cardinality


def _count_rewritten(metrics: dict[str, int], rewritten: Sequence[AddFile]) -> None:
    """An insert-replace's files written by its removal (rows copied, files with new deletion
    vectors) count as written files and rows, as the reference's
    ``registerInsertReplaceMetrics`` counts them; ``numCopiedRows`` is their rows."""
    copied = [_logical_records(a) for a in rewritten]
    metrics["numFiles"] = metrics.get("numFiles", 0) + len(rewritten)
    metrics["numOutputBytes"] = metrics.get("numOutputBytes", 0) + sum(a.size for a in rewritten)
    if all(n is not None for n in copied):
        rows = sum(n or 0 for n in copied)
        metrics["numOutputRows"] = metrics.get("numOutputRows", 0) + rows
        metrics["numCopiedRows"] = rows


def _metrics(
    adds: Sequence[AddFile], removes: Sequence[RemoveFile], operation: operations.Operation
) -> dict[str, int]:
    if operation.name == "STREAMING UPDATE":
        return {
            "numAddedFiles": len(adds),
            "numRemovedFiles": len(removes),
            "numOutputRows": sum(_num_records(a) or 0 for a in adds),
            "numOutputBytes": sum(a.size for a in adds),
        }
    metrics = {
        "numFiles": len(adds),
        "numOutputRows": sum(_num_records(a) or 0 for a in adds),
        "numOutputBytes": sum(a.size for a in adds),
    }
    if operation.parameters.get("mode") == "Overwrite":
        metrics["numRemovedFiles"] = len(removes)
        metrics["numRemovedBytes"] = sum(r.size or 0 for r in removes)
    return metrics
