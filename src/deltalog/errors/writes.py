"""Errors of writing: schemas that do not fit, partitioning, properties and protocols."""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import (
    DeltaWriteError,
    InternalError,
    InvalidArgumentError,
    UnsupportedFeatureError,
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


def geospatial_srid_not_supported(
    column: str, type_name: str, table: str | None
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_GEOSPATIAL_SRID_NOT_SUPPORTED",
        f"Geospatial type has an unsupported srid: column {column} is {type_name}. Delta "
        "tables only support non-negative srid values.",
        table=table,
        help="give the column one SRID (e.g. geometry(4326)) and cast its values to it.",
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


def catalog_managed_write(table: str, *, enabling: bool = False) -> UnsupportedFeatureError:
    """A commit (or VACUUM, OPTIMIZE, log cleanup) refused on a ``catalogManaged`` table: its
    managing catalog must ratify every commit (PROTOCOL.md "Catalog-managed tables"), and
    deltalog reaches tables by path only. ``enabling``: the commit would create the table with
    the feature, or add it."""
    if enabling:
        return UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_CATALOG_MANAGED_TABLE_CREATION",
            "Creating a catalog-managed table, or adding table feature catalogManaged to a "
            "table, is unsupported: every commit from then on must be ratified by the catalog "
            "that manages the table, and deltalog commits through the file system only.",
            table=table,
            help="create the table through its catalog (an engine connected to it, e.g. "
            "delta-spark with Unity Catalog), or leave out 'delta.feature.catalogManaged'.",
            features=("catalogManaged",),
        )
    return UnsupportedFeatureError(
        "DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_TABLE_BLOCKED",
        "Path-based writes are not allowed for a catalog-managed table (table feature "
        "catalogManaged): its managing catalog must commit every version, and deltalog "
        "writes through the file system only, so nothing was committed.",
        table=table,
        help="write through the table's catalog (an engine connected to it, e.g. delta-spark "
        "with Unity Catalog). deltalog can still read the versions published in _delta_log.",
        features=("catalogManaged",),
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


def shredding_table_property_disabled(table: str) -> UnsupportedFeatureError:
    """Shredded variants about to be written into a table whose ``delta.enableVariantShredding``
    is not ``true`` (PROTOCOL.md: such tables take unshredded variants only)."""
    return UnsupportedFeatureError(
        "DELTA_SHREDDING_TABLE_PROPERTY_DISABLED",
        "Attempted to write shredded Variants but the table does not support shredded writes "
        "(spark.sql.variant.forceShreddingSchemaForTest is set).",
        table=table,
        help="set the table property delta.enableVariantShredding to true, or unset "
        "spark.sql.variant.forceShreddingSchemaForTest.",
        features=("variantShredding",),
    )


def shredded_variant_unreadable(table: str, column: str) -> UnsupportedFeatureError:
    """A data file holds column ``column`` as a shredded variant, which pyarrow reads as its
    parts (no engine-free code rebuilds the values from them)."""
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_SHREDDED_VARIANT",
        f"column {column} is a shredded variant in a data file; the Python reader cannot "
        "rebuild shredded values (reading it as unshredded would lose the shredded fields).",
        table=table,
        help="read or rewrite the table through Spark (4.0 or newer), whose parquet reader "
        "rebuilds shredded variants.",
        features=("variantShredding",),
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


# -- deletion vectors ----------------------------------------------------------------------------


def deletion_vector_size_mismatch(
    table: str | None, path: str | None, old_cardinality: int, missing: int
) -> InternalError:
    """A file's new deletion vector lacks rows its old one deleted (the reference's
    ``deletionVectorSizeMismatch`` sanity check of ``AddFile.removeRows``): committing it would
    bring deleted rows back."""
    where = f" of {path}" if path else ""
    return InternalError(
        "DELTA_DELETION_VECTOR_SIZE_MISMATCH",
        "Deletion vector integrity check failed. Encountered a size mismatch: the new deletion "
        f"vector{where} lacks {missing} of the {old_cardinality} rows its old one deleted.",
        table=table,
        help="this is a bug in the command that built the vector (it must merge the old one "
        "in); nothing was committed. Please report it.",
    )


# -- column defaults (allowColumnDefaults) -------------------------------------------------------


def column_defaults_not_enabled(command: str, table: str | None) -> DeltaWriteError:
    return DeltaWriteError(
        "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED",
        f"Failed to execute {command} command because it assigned a column DEFAULT value, but "
        "the corresponding table feature was not enabled.",
        table=table,
        help="retry the command after executing ALTER TABLE tableName SET "
        "TBLPROPERTIES('delta.feature.allowColumnDefaults' = 'supported').",
    )


def column_default_on_add_column(table: str | None) -> DeltaWriteError:
    return DeltaWriteError(
        "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED",
        "Failed to execute the command because DEFAULT values are not supported when adding "
        "new columns to previously existing Delta tables.",
        table=table,
        help="add the column without a default value first, then run a second ALTER TABLE "
        "ALTER COLUMN SET DEFAULT command to apply it to future inserted rows.",
    )


def column_default_not_evaluable(columns: Iterable[str], table: str | None) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_WRITE_COLUMN_DEFAULTS",
        f"the data lacks column(s) {', '.join(columns)}, whose DEFAULT value is a Spark SQL "
        "expression the Python writer cannot evaluate.",
        table=table,
        help="give the columns' values in the data, or write this table through Spark "
        "(df.write.format('delta')).",
    )
