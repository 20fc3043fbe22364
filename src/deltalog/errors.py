"""One error root for deltalog, with families grouped by what the caller does next.

Every error carries a stable ``error_class`` (the reference's ``DELTA_*`` name where one exists),
the table it concerns, and a message that names the versions or files involved and ends with what
to do. Build errors through the factory functions at the bottom so messages stay uniform.
"""

from __future__ import annotations

from collections.abc import Iterable


class DeltaError(Exception):
    """Root of every error deltalog raises on purpose.

    Attributes:
        error_class: stable identifier, e.g. ``DELTA_VERSIONS_NOT_CONTIGUOUS``.
        table: the table root the error concerns, when known.
    """

    def __init__(
        self, error_class: str, message: str, *, table: str | None = None, help: str | None = None
    ) -> None:
        self.error_class = error_class
        self.table = table
        self.help = help
        text = f"[{error_class}] "
        if table:
            text += f"Table {table}: "
        text += message
        if help:
            text += f" Help: {help}"
        super().__init__(text)


class TableNotFoundError(DeltaError):
    """The path holds no Delta table (no ``_delta_log`` or an empty one)."""


class InvalidTableError(DeltaError):
    """The log is corrupt or incomplete: a gap, a truncated commit, a missing checkpoint part,
    a missing protocol or metadata, a data file named in the log but absent."""


class VersionNotFoundError(DeltaError):
    """The requested version is outside the table's available history."""


class TimestampOutOfRangeError(DeltaError):
    """The requested timestamp is before the earliest or after the latest commit."""


class UnsupportedFeatureError(DeltaError):
    """The table needs a protocol version or table feature deltalog does not support."""

    def __init__(
        self,
        error_class: str,
        message: str,
        *,
        table: str | None = None,
        help: str | None = None,
        features: Iterable[str] = (),
    ) -> None:
        self.features = tuple(sorted(features))
        super().__init__(error_class, message, table=table, help=help)


class InvalidArgumentError(DeltaError, ValueError):
    """A caller passed a bad option or argument."""


class InternalError(DeltaError):
    """A broken invariant inside deltalog: this is a bug, please report it."""


class DeltaWriteError(DeltaError):
    """A write that cannot be done as asked (mode, schema, constraint, option, table state);
    nothing was committed."""


class DeltaConcurrentModificationException(DeltaError):
    """A concurrent commit conflicts with this transaction (sqlState 2D521); nothing of this
    transaction was committed. Names follow ``delta.exceptions``.

    Attributes:
        version: the winning commit's version, when known.
    """

    def __init__(
        self,
        error_class: str,
        message: str,
        *,
        table: str | None = None,
        help: str | None = None,
        version: int | None = None,
    ) -> None:
        self.version = version
        super().__init__(error_class, message, table=table, help=help)


class ConcurrentWriteException(DeltaConcurrentModificationException):
    """Another writer committed the version this one-shot commit needed."""


class MetadataChangedException(DeltaConcurrentModificationException):
    """A concurrent commit changed the table's metadata (schema, properties, partitioning)."""


class ProtocolChangedException(DeltaConcurrentModificationException):
    """A concurrent commit changed the table's protocol."""


class ConcurrentAppendException(DeltaConcurrentModificationException):
    """A concurrent commit added files this transaction should have read."""


class ConcurrentDeleteReadException(DeltaConcurrentModificationException):
    """A concurrent commit removed a file this transaction read."""


class ConcurrentDeleteDeleteException(DeltaConcurrentModificationException):
    """A concurrent commit removed a file this transaction also removes."""


class ConcurrentTransactionException(DeltaConcurrentModificationException):
    """A concurrent commit used an application id (``txn``) or metadata domain this transaction
    depends on (typically two streams sharing one checkpoint)."""


# --------------------------------------------------------------------------------------------
# Factories. Keep messages in one place so tests and the CLI can rely on them.
# --------------------------------------------------------------------------------------------


def table_not_found(table: str, reason: str = "") -> TableNotFoundError:
    detail = f" ({reason})" if reason else ""
    return TableNotFoundError(
        "DELTA_TABLE_NOT_FOUND",
        f"is not a Delta table{detail}.",
        table=table,
        help="check the path; a Delta table has a non-empty _delta_log directory.",
    )


def versions_not_contiguous(
    table: str, versions: list[int], version_to_load: int
) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_VERSIONS_NOT_CONTIGUOUS",
        f"Versions ({', '.join(map(str, versions))}) are not contiguous. A gap in the delta log "
        f"between versions {versions[0]} and {versions[-1]} was detected while trying to load "
        f"version {version_to_load}.",
        table=table,
        help="the log is missing commit files; restore them from a backup.",
    )


def truncated_log(
    table: str, version_to_load: int, checkpoint_version: int, first_commit: int
) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_TRUNCATED_TRANSACTION_LOG",
        f"Unable to reconstruct state at version {version_to_load} as the transaction log has "
        f"been truncated: the newest usable checkpoint is at version {checkpoint_version} but the "
        f"first commit after it is version {first_commit}.",
        table=table,
        help="read a later version, or restore the missing commits or checkpoint.",
    )


def missing_checkpoint_parts(table: str, version: int) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_MISSING_PART_FILES",
        f"Couldn't find all part files of the checkpoint version: {version}, and the commits "
        "needed to replay without it are gone.",
        table=table,
        help="restore the missing checkpoint parts.",
    )


def corrupt_commit(table: str, file: str, line: int, reason: str) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_CORRUPT_COMMIT",
        f"Commit file {file} line {line} is not a valid action: {reason}.",
        table=table,
        help="the commit may be truncated or hand-edited; restore it from a backup.",
    )


def corrupt_checkpoint(table: str, file: str, reason: str) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_CORRUPT_CHECKPOINT",
        f"Checkpoint file {file} cannot be read: {reason}.",
        table=table,
        help="delete the damaged checkpoint (and _last_checkpoint) to replay commits.",
    )


def state_recover_error(table: str, what: str, version: int) -> InvalidTableError:
    return InvalidTableError(
        "DELTA_STATE_RECOVER_ERROR",
        f"The {what} of your Delta table could not be recovered while reconstructing version "
        f"{version}: no {what} action was found in the log.",
        table=table,
        help="the log is corrupt; restore commit 0 or the checkpoint.",
    )


def version_not_found(table: str, version: int, earliest: int, latest: int) -> VersionNotFoundError:
    return VersionNotFoundError(
        "DELTA_VERSION_NOT_FOUND",
        f"Cannot time travel Delta table to version {version}. Available versions: "
        f"[{earliest}, {latest}].",
        table=table,
    )


def timestamp_earlier_than_retention(
    table: str, timestamp_ms: int, earliest_ms: int, earliest_version: int
) -> TimestampOutOfRangeError:
    return TimestampOutOfRangeError(
        "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION",
        f"The provided timestamp ({_fmt_ts(timestamp_ms)}) is before the earliest version "
        f"available to this table ({_fmt_ts(earliest_ms)}, version {earliest_version}).",
        table=table,
        help="use a timestamp at or after the earliest commit.",
    )


def timestamp_greater_than_latest(
    table: str, timestamp_ms: int, latest_ms: int, latest_version: int
) -> TimestampOutOfRangeError:
    return TimestampOutOfRangeError(
        "DELTA_TIMESTAMP_GREATER_THAN_COMMIT",
        f"The provided timestamp ({_fmt_ts(timestamp_ms)}) is after the latest version available "
        f"to this table ({_fmt_ts(latest_ms)}, version {latest_version}).",
        table=table,
        help="use a timestamp at or before the latest commit.",
    )


def no_recreatable_history(table: str) -> VersionNotFoundError:
    return VersionNotFoundError(
        "DELTA_NO_RECREATABLE_HISTORY_FOUND",
        "No recreatable commits found: commit 0 is gone and no complete checkpoint can start a "
        "replay.",
        table=table,
    )


def unsupported_reader_version(table: str, version: int) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_INVALID_PROTOCOL_VERSION",
        f"Unsupported Delta protocol version: the table requires reader version {version}, "
        "deltalog supports reader versions 1, 2 and 3.",
        table=table,
        help="upgrade deltalog, or read the table with a newer Delta client.",
    )


def unsupported_reader_features(table: str, features: Iterable[str]) -> UnsupportedFeatureError:
    names = sorted(features)
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
        f"Unable to read this table because it requires reader table feature(s) that deltalog "
        f"does not support: {', '.join(names)}.",
        table=table,
        help="upgrade deltalog, or read the table with a client that supports them.",
        features=names,
    )


def invalid_argument(message: str, table: str | None = None) -> InvalidArgumentError:
    return InvalidArgumentError("DELTA_INVALID_ARGUMENT", message, table=table)


def _fmt_ts(ms: int) -> str:
    import datetime as _dt

    return (
        _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        + " UTC"
    )


def checkpoint_snapshot_mismatch(
    table: str, version: int, written: int, expected: int
) -> InternalError:
    return InternalError(
        "DELTA_CHECKPOINT_SNAPSHOT_MISMATCH",
        f"State of the checkpoint doesn't match that of the snapshot: the checkpoint of version "
        f"{version} would hold {written} files (or rows) where the snapshot has {expected}; "
        "nothing was written.",
        table=table,
        help="this is a bug, please report it; the table itself is unchanged.",
    )


# --------------------------------------------------------------------------------------------
# Concurrent modification (deltalog.txn.conflicts). ``table_name`` names the table as the
# reference does in these messages (``delta.`<path>``` or the metadata name); ``operation`` and
# ``version`` are the winning commit's; ``commit_info`` is its commitInfo as JSON.
# --------------------------------------------------------------------------------------------

CONCURRENCY_HELP = (
    "refresh the table and retry the operation; see "
    "https://docs.delta.io/latest/concurrency-control.html."
)


def _winner(operation: str, version: int, article: str = "a") -> str:
    return f"{article} concurrent {operation} committed at version {version}"


def _file_list(paths: Iterable[str], limit: int = 5) -> str:
    names = list(paths)
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


def _conflicting(commit_info: str | None) -> str:
    return f" Conflicting commit: {commit_info}" if commit_info else ""


def concurrent_append(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    read_version: int,
    partition: str | None,
) -> ConcurrentAppendException:
    where = f"partition {partition} of {table_name}" if partition else table_name
    return ConcurrentAppendException(
        "DELTA_CONCURRENT_APPEND",
        f"Files were added to {where} by {_winner(operation, version)}, after this "
        f"transaction read version {read_version}; its reads should have included them.",
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def concurrent_delete_read(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    files: Iterable[str],
    partition: str | None,
    *,
    whole_table: bool = False,
) -> ConcurrentDeleteReadException:
    where = f"partition {partition} of {table_name}" if partition else table_name
    what = (
        f"while this transaction read the whole table: {_file_list(files)}"
        if whole_table
        else f"that this transaction read: {_file_list(files)}"
    )
    return ConcurrentDeleteReadException(
        "DELTA_CONCURRENT_DELETE_READ",
        f"{_winner(operation, version, 'A')} removed files of {where} {what}.",
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def concurrent_delete_delete(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    files: Iterable[str],
    partition: str | None,
) -> ConcurrentDeleteDeleteException:
    where = f"partition {partition} of {table_name}" if partition else table_name
    return ConcurrentDeleteDeleteException(
        "DELTA_CONCURRENT_DELETE_DELETE",
        f"{_winner(operation, version, 'A')} removed files of {where} that this "
        f"transaction also removes: {_file_list(files)}.",
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def concurrent_app_transaction(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    app_ids: Iterable[str],
    commit_info: str | None,
) -> ConcurrentTransactionException:
    ids = ", ".join(repr(a) for a in sorted(app_ids))
    return ConcurrentTransactionException(
        "DELTA_CONCURRENT_TRANSACTION",
        f"{_winner(operation, version, 'A')} recorded a new version of {table_name} for "
        f"application id {ids}, which this transaction read: two writers use one application "
        "id, typically two streaming queries sharing one checkpoint." + _conflicting(commit_info),
        table=table,
        help="run one writer per application id (checkpoint location), then " + CONCURRENCY_HELP,
        version=version,
    )


def concurrent_domain_metadata(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    domain: str,
    commit_info: str | None,
) -> ConcurrentTransactionException:
    return ConcurrentTransactionException(
        "DELTA_CONCURRENT_TRANSACTION",
        f"{_winner(operation, version, 'A')} changed metadata domain {domain!r} of "
        f"{table_name}, which this transaction also changes." + _conflicting(commit_info),
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def metadata_changed(
    table: str, table_name: str, operation: str, version: int, commit_info: str | None
) -> MetadataChangedException:
    return MetadataChangedException(
        "DELTA_METADATA_CHANGED",
        f"The metadata of {table_name} (schema, partitioning or properties) was changed by "
        f"{_winner(operation, version)}." + _conflicting(commit_info),
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


def protocol_changed(
    table: str,
    table_name: str,
    operation: str,
    version: int,
    reason: str,
    commit_info: str | None,
) -> ProtocolChangedException:
    extra = (
        " This happens when several writers create the table in an empty directory at once; "
        "create the table before writing to it concurrently."
        if version == 0
        else ""
    )
    return ProtocolChangedException(
        "DELTA_PROTOCOL_CHANGED",
        f"The protocol of {table_name} was changed by {_winner(operation, version)}{reason}."
        + extra
        + _conflicting(commit_info),
        table=table,
        help=CONCURRENCY_HELP,
        version=version,
    )


# -- write side: schemas, partitioning, protocol and table properties ----------------------------


def unsupported_data_type(column: str, type_name: str, table: str | None) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_DATA_TYPE",
        f"Column {column} has type {type_name}, which has no Delta Lake equivalent.",
        table=table,
        help="cast the column to a supported type (e.g. unsigned integers to a wider signed "
        "integer, date64 to date32, float16 to float32, decimal256 to decimal128) first.",
    )


def merge_incompatible_datatype(current: str, update: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_MERGE_INCOMPATIBLE_DATATYPE",
        f"Failed to merge incompatible data types {current} and {update}.",
    )


def merge_incompatible_decimal(ranges: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_MERGE_INCOMPATIBLE_DECIMAL_TYPE",
        f"Failed to merge decimal types with incompatible {ranges}.",
    )


def failed_to_merge_fields(
    table: str, column: str, current: str, update: str, cause: DeltaWriteError
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FAILED_TO_MERGE_FIELDS",
        f"Failed to merge fields '{column}' and '{column}': the table has type {current}, the "
        f"data has type {update} ([{cause.error_class}] {cause.args[0].split('] ', 1)[-1]})",
        table=table,
        help=f"cast column {column} to {current} before writing, or replace the schema with "
        ".option('overwriteSchema', 'true') in overwrite mode.",
    )


def duplicate_columns(table: str | None, columns: Iterable[str], where: str) -> DeltaWriteError:
    places = {
        "DATA": "in the data being saved",
        "PARTITION_COLUMNS": "in the partition columns",
        "TABLE_SCHEMA": "in the table schema",
    }
    names = ", ".join(sorted(columns))
    return DeltaWriteError(
        f"DELTA_DUPLICATE_COLUMNS_FOUND.{where}",
        f"Found duplicate column(s) {places.get(where, '')}: {names} (column names are "
        "case-insensitive).",
        table=table,
        help="rename or drop the duplicates (names differing only in case count as the same).",
    )


def schema_mismatch(
    table: str,
    table_id: str | None,
    table_schema: str,
    data_schema: str,
    differences: Iterable[str],
    overwrite_hint: bool,
) -> DeltaWriteError:
    ident = f" (Table ID: {table_id})" if table_id else ""
    diff = "; ".join(differences)
    text = (
        f"A schema mismatch detected when writing to the Delta table{ident}: {diff}. "
        f"Table schema: {table_schema}. Data schema: {data_schema}."
    )
    help = "to add the new columns, set .option('mergeSchema', 'true') (or the session conf "
    help += "spark.databricks.delta.schema.autoMerge.enabled=true)"
    if overwrite_hint:
        help += "; to overwrite the schema, set .option('overwriteSchema', 'true') (not "
        help += "together with replaceWhere)"
    return DeltaWriteError(
        "DELTA_METADATA_MISMATCH",
        text,
        table=table,
        help=help + ".",
    )


def partition_column_not_found(
    table: str | None, column: str, names: Iterable[str]
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_PARTITION_COLUMN_NOT_FOUND",
        f"Partition column {column} not found in schema [{', '.join(names)}].",
        table=table,
        help="partition by top-level columns of the data (names are case-insensitive).",
    )


def ambiguous_partition_column(
    table: str | None, column: str, matches: Iterable[str]
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_AMBIGUOUS_PARTITION_COLUMN",
        f"Ambiguous partition column {column} can be {', '.join(matches)}.",
        table=table,
        help="rename the columns so that their names differ by more than case.",
    )


def invalid_partition_column_type(
    table: str | None, column: str, type_name: str
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_INVALID_PARTITION_COLUMN_TYPE",
        f"Using column {column} of type {type_name} as a partition column is not supported.",
        table=table,
        help="partition by columns of primitive types (not struct, array, map, void or variant).",
    )


def non_partition_column_absent(table: str | None, all_columns: bool) -> DeltaWriteError:
    if all_columns:
        return DeltaWriteError(
            "DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION",
            "Cannot use all columns for partition columns.",
            table=table,
            help="leave at least one column out of partitionBy.",
        )
    return DeltaWriteError(
        "DELTA_NON_PARTITION_COLUMN_ABSENT",
        "Data written into Delta needs to contain at least one non-partitioned column: all of "
        "the provided columns are partition columns.",
        table=table,
        help="include at least one data column that is not a partition column.",
    )


def unsupported_writer_version(table: str, reader: int, writer: int) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_INVALID_PROTOCOL_VERSION",
        f"Unsupported Delta protocol version: the table requires reader version {reader} and "
        f"writer version {writer}, deltalog writes reader versions 1, 2 and 3 and writer versions "
        "1 to 7.",
        table=table,
        help="write to the table with a newer Delta client.",
    )


def unsupported_writer_features(table: str, features: Iterable[str]) -> UnsupportedFeatureError:
    names = sorted(features)
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
        "Unable to write this table because it requires writer table feature(s) that deltalog "
        f"does not support: {', '.join(names)}.",
        table=table,
        help="read it with deltalog, and write it with a client that supports these features.",
        features=names,
    )


def features_require_manual_enablement(
    table: str | None, features: Iterable[str], supported: Iterable[str]
) -> DeltaWriteError:
    names = sorted(features)
    keys = ", ".join(f"'delta.feature.{n}' = 'supported'" for n in names)
    return DeltaWriteError(
        "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT",
        "Your table schema requires manual enablement of the following table feature(s): "
        f"{', '.join(names)}. Current supported feature(s): {', '.join(sorted(supported))}.",
        table=table,
        help=f"run ALTER TABLE <table> SET TBLPROPERTIES ({keys}) first.",
    )


def unknown_configuration(key: str, table: str | None) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNKNOWN_CONFIGURATION",
        f"Unknown configuration was specified: {key}.",
        table=table,
        help="check the spelling against the Delta table properties (delta.appendOnly, "
        "delta.enableChangeDataFeed, delta.logRetentionDuration, ...); a property that is not "
        "a Delta one must not start with 'delta.'.",
    )


def invalid_table_property_value(
    key: str, value: str, expected: str, table: str | None
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_INVALID_TABLE_PROPERTY",
        f"Table property {key} has an invalid value {value!r}: it {expected}.",
        table=table,
        help=f"set {key} to a valid value.",
    )


def cannot_modify_table_property(key: str, table: str | None) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CANNOT_MODIFY_TABLE_PROPERTY",
        f"The Delta table configuration {key} cannot be specified by the user.",
        table=table,
        help=f"remove {key}: it is maintained by the writer.",
    )


def unsupported_feature_status(
    feature: str, status: str, table: str | None
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNSUPPORTED_FEATURE_STATUS",
        f'Expecting the status for table feature {feature} to be "supported", but got "{status}".',
        table=table,
        help=f"set delta.feature.{feature} = 'supported'.",
    )


def unsupported_features_in_config(keys: Iterable[str], table: str | None) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG",
        "Table features configured in the following Delta table properties are not recognized: "
        f"{', '.join(sorted(keys))}.",
        table=table,
        help="check the feature names (e.g. delta.feature.deletionVectors, "
        "delta.feature.columnMapping).",
    )


def protocol_property_invalid(
    key: str, value: str, allowed: str, table: str | None
) -> InvalidArgumentError:
    is_int = value.strip().lstrip("-").isdigit()
    return InvalidArgumentError(
        "DELTA_INVALID_TABLE_PROPERTY" if is_int else "DELTA_PROTOCOL_PROPERTY_NOT_INT",
        f"Protocol property {key} needs to be "
        + (f"one of {allowed}" if is_int else "an integer")
        + f". Found {value!r}.",
        table=table,
        help=f"set {key} to one of {allowed}.",
    )


def read_feature_protocol_requires_write(table: str | None) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_READ_FEATURE_PROTOCOL_REQUIRES_WRITE",
        "Unable to upgrade only the reader protocol version to use table features (reader "
        "version 3): writer protocol version must be at least 7 to proceed.",
        table=table,
        help="set delta.minWriterVersion=7 together with delta.minReaderVersion=3.",
    )


def identity_inconsistent_metadata(
    column: str, has_start: bool, has_step: bool, has_insert: bool, table: str | None
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_IDENTITY_COLUMN_INCONSISTENT_METADATA",
        f"Inconsistent IDENTITY metadata for column {column} detected: delta.identity.start "
        f"{'present' if has_start else 'absent'}, delta.identity.step "
        f"{'present' if has_step else 'absent'}, delta.identity.allowExplicitInsert "
        f"{'present' if has_insert else 'absent'}.",
        table=table,
        help="an identity column needs all three metadata keys.",
    )
