"""Errors of table management: protocol and feature changes, table properties, CONVERT TO
DELTA, CLONE and manifest generation, with the reference's error classes and messages.

Imported from here, not re-exported by ``deltalog.errors`` (like :mod:`deltalog.errors.vacuum`),
so commands developed side by side do not edit one import list. Factories are named after the
reference's ``DeltaErrors`` methods.
"""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import (
    DeltaWriteError,
    InvalidArgumentError,
    TableNotFoundError,
    UnsupportedFeatureError,
)

# -- protocol and features ------------------------------------------------------------------------


def protocol_downgrade_exception(table: str, old: str, new: str) -> DeltaWriteError:
    """``old`` and ``new``: the protocols' ``simple_string()``."""
    return DeltaWriteError(
        "DELTA_INVALID_PROTOCOL_DOWNGRADE",
        f"Protocol version cannot be downgraded from ({old}) to ({new}).",
        table=table,
        help="a protocol only goes up; drop a feature with dropFeatureSupport.",
    )


def drop_table_feature_is_a_delta_property(table: str, name: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY",
        f"Cannot drop `{name}` from this table because this is a delta table property and not "
        "a table feature.",
        table=table,
        help="unset the property instead (unset_table_properties / ALTER TABLE UNSET).",
    )


def drop_table_feature_not_supported_by_protocol(table: str, name: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT",
        f"Cannot drop {name} from this table because it is not currently present in the "
        "table's protocol.",
        table=table,
        features=(name,),
    )


def drop_table_feature_non_removable(table: str, name: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE",
        f"Cannot drop {name} because dropping this feature is not supported.",
        table=table,
        features=(name,),
    )


def drop_table_feature_not_supported_by_client(table: str, name: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE",
        f"Cannot drop {name} because it is not supported by this Delta version.",
        table=table,
        features=(name,),
    )


def history_truncation_not_allowed(table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED",
        "The particular feature does not require history truncation.",
        table=table,
        help="call dropFeatureSupport without truncateHistory.",
    )


def can_only_drop_checkpoint_protection_with_history_truncation(
    table: str,
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION",
        "Cannot drop the checkpointProtection feature without truncating history.",
        table=table,
        help="use truncateHistory=True.",
    )


def drop_table_feature_dependent(
    table: str, name: str, dependents: Iterable[str]
) -> DeltaWriteError:
    names = ", ".join(sorted(dependents))
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_DEPENDENT_FEATURE",
        f"Cannot drop table feature `{name}` because some other features ({names}) in this "
        f"table depends on `{name}`. Consider dropping them first before dropping this feature.",
        table=table,
    )


def drop_check_constraint_feature(table: str, constraints: Iterable[str]) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE",
        "Cannot drop the CHECK constraints table feature. The following constraints must be "
        f"dropped first: {', '.join(sorted(constraints))}.",
        table=table,
    )


def drop_table_feature_in_use(table: str, name: str, traces: str, fix: str) -> DeltaWriteError:
    # The reference's pre-downgrade commands remove such traces themselves (disabling the
    # property, purging deletion vectors...); deltalog refuses and says what to do first.
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_FEATURE_IN_USE",
        f"Cannot drop {name}: the current version still uses it ({traces}). Nothing was committed.",
        table=table,
        help=fix,
    )


def invalid_column_names_when_removing_column_mapping(
    table: str, names: Iterable[str]
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING",
        "Found invalid character(s) among ' ,;{}()\\n\\t=' in the column names of the schema: "
        f"{', '.join(sorted(names))}. Column mapping cannot be removed while they are there; "
        "nothing was committed.",
        table=table,
        help="rename those columns, then drop the feature again.",
    )


def drop_table_feature_needs_history_protection(
    table: str, name: str, truncate_history: bool
) -> UnsupportedFeatureError:
    how = "TRUNCATE HISTORY" if truncate_history else "checkpoint protection"
    return UnsupportedFeatureError(
        "DELTA_FEATURE_DROP_REQUIRES_HISTORY_PROTECTION",
        f"Cannot drop {name}: it is a reader-writer feature whose traces in the table's "
        f"history must be protected ({how}), which deltalog does not implement yet.",
        table=table,
        help="drop it with delta-spark (ALTER TABLE ... DROP FEATURE).",
        features=(name,),
    )


def drop_feature_wait_for_retention_period(
    table: str, name: str, log_retention: str, truncate_retention: str
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD",
        f"Dropping {name} was partially successful. The feature is now no longer used in the "
        "current version of the table. However, the feature is still present in historical "
        "versions of the table. The table feature cannot be dropped from the table protocol "
        "until these historical versions have expired. The retention period for historical "
        f"versions is currently configured as delta.logRetentionDuration={log_retention}.",
        table=table,
        help=f"wait for the TRUNCATE HISTORY retention period to expire ({truncate_retention}) "
        "and run the drop with truncateHistory again, or drop it without truncateHistory "
        "(checkpoint protection).",
    )


def drop_feature_historical_versions_exist(
    table: str, name: str, log_retention: str, truncate_retention: str
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST",
        f"Cannot drop {name} because the Delta log contains historical versions that use the "
        "feature. Please wait until the history retention period "
        f"(delta.logRetentionDuration={log_retention}) has passed since the feature was last "
        "active.",
        table=table,
        help=f"wait for the TRUNCATE HISTORY retention period to expire ({truncate_retention}) "
        "and run the drop with truncateHistory again.",
    )


def drop_checkpoint_protection_wait_for_retention_period(
    table: str, truncate_retention: str
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_WAIT_FOR_RETENTION_PERIOD",
        "The operation did not succeed because there are still traces of dropped features in "
        "the table history. CheckpointProtection cannot be dropped until these historical "
        "versions have expired. The retention period for historical versions is currently "
        f"configured to {truncate_retention}.",
        table=table,
        help="wait for the historical versions to expire, then repeat the drop.",
    )


def drop_feature_conflict_revalidation_failed(
    table: str, version: int, operation: str | None
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL",
        "Cannot drop feature because a concurrent transaction modified the table. Please try "
        f"the operation again. Conflicting commit: version {version} ({operation}).",
        table=table,
        help="run the drop again.",
    )


def drop_feature_checkpoint_failed(table: str, name: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FEATURE_DROP_CHECKPOINT_FAILED",
        f"Dropping {name} failed due to a failure in checkpoint creation.",
        table=table,
        help="try again later; nothing of the feature was dropped from the protocol.",
    )


def unset_non_existent_property(table: str, key: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNSET_NON_EXISTENT_PROPERTY",
        f"Attempted to unset non-existent property '{key}' in table {table}",
        table=table,
        help="pass if_exists=True to ignore absent keys.",
    )


# -- CONVERT TO DELTA -----------------------------------------------------------------------------


def convert_non_parquet_table(table: str, source: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_CONVERT_NON_PARQUET_TABLE",
        "CONVERT TO DELTA only supports parquet tables, but you are trying to convert a "
        f"{source} source: {table}",
        table=table,
    )


def missing_provider_for_convert(identifier: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_MISSING_PROVIDER_FOR_CONVERT",
        "CONVERT TO DELTA only supports parquet tables. Please rewrite your target as "
        f"parquet.`{identifier}` if it's a parquet directory.",
    )


def convert_empty_directory(table: str) -> TableNotFoundError:
    return TableNotFoundError(
        "DELTA_CONVERT_EMPTY_DIRECTORY",
        "No parquet files were found to convert (the directory is empty or absent).",
        table=table,
        help="check the path; an empty table is created with DeltaTable.create instead.",
    )


def unexpected_partition_column_from_file_name(
    table: str, path: str, column: str, expected: Iterable[str]
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME",
        f"Expecting partition column {column} to be one of {list(expected)}, but found it in "
        f"the file name: {path}",
        table=table,
    )


def unexpected_num_partition_columns_from_file_name(
    table: str, path: str, expected: Iterable[str], found: Iterable[str]
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME",
        f"Expecting {len(list(expected))} partition column(s): {list(expected)}, but found "
        f"{len(list(found))} partition column(s): {list(found)} from parsing the file name: "
        f"{path}",
        table=table,
    )


def failed_cast_partition_value(
    table: str, value: str, data_type: str, column: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_FAILED_CAST_PARTITION_VALUE",
        f"Failed to cast partition value `{value}` to {data_type} (column {column}).",
        table=table,
    )


def convert_schema_conflict(table: str, path: str, detail: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_FAILED_MERGE_SCHEMA_FILE",
        f"Failed to merge schema of file {path}: {detail}",
        table=table,
        help="the parquet files disagree on a column's type; rewrite the odd files first.",
    )


# -- CLONE ----------------------------------------------------------------------------------------


def unsupported_non_empty_clone(table: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_NON_EMPTY_CLONE",
        "The clone destination table is non-empty. Please TRUNCATE or DELETE FROM the table "
        "before running CLONE.",
        table=table,
        help="pass replace=True to replace the target table.",
    )


def clone_replace_same_table(table: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_CLONE_REPLACE_SAME_TABLE",
        f"You tried to REPLACE an existing table ({table}) with CLONE. This operation is "
        "unsupported. Try a different target for CLONE or delete the table at the current "
        "target.",
        table=table,
    )


def invalid_clone_path(path: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_INVALID_CLONE_PATH",
        "The target location for CLONE needs to be an absolute path or table name. Use an "
        f"absolute path instead of {path}.",
    )


# -- manifests ------------------------------------------------------------------------------------


def unsupported_generate_mode(table: str, mode: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_MODE_NOT_SUPPORTED",
        f"Specified mode '{mode}' is not supported. Supported modes are: symlink_format_manifest",
        table=table,
    )


def generate_with_deletion_vectors(table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS",
        "The 'GENERATE symlink_format_manifest' command is not supported on table versions "
        "with deletion vectors. If you need to generate manifests, consider disabling deletion "
        "vectors on this table using 'ALTER TABLE table SET TBLPROPERTIES "
        "(delta.enableDeletionVectors = false)'.",
        table=table,
        features=("deletionVectors",),
    )


def manifest_with_column_mapping(table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING",
        "Manifest generation is not supported for tables that leverage column mapping, as "
        "external readers cannot read these Delta tables.",
        table=table,
        features=("columnMapping",),
    )
