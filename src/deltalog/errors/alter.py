"""Errors of ALTER TABLE's schema changes (CHANGE/RENAME/DROP COLUMN, CLUSTER BY); the error
classes and sqlStates are delta-spark's."""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import DeltaWriteError, InvalidArgumentError, UnsupportedFeatureError

_ENABLE_MAPPING = (
    "Please enable Column Mapping on your Delta table with mapping mode 'name': "
    "ALTER TABLE table_name SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name'). "
    "If your table is not on the required protocol version it will be upgraded; column "
    "mapping requires at least protocol (2, 5)."
)


def rename_column_not_supported(table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_RENAME_COLUMN",
        "Column rename is not supported for your Delta table.",
        table=table,
        help=_ENABLE_MAPPING,
    )


def drop_column_not_supported(table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_DROP_COLUMN",
        "DROP COLUMN is not supported for your Delta table.",
        table=table,
        help=_ENABLE_MAPPING,
    )


def drop_partition_column(table: str, columns: Iterable[str]) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN",
        f"Dropping partition columns ({','.join(columns)}) is not allowed.",
        table=table,
    )


def drop_clustering_column(table: str, columns: Iterable[str]) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN",
        f"Dropping clustering columns ({','.join(columns)}) is not allowed.",
        table=table,
        help="change the clustering first: ALTER TABLE ... CLUSTER BY (...) or CLUSTER BY NONE.",
    )


def drop_only_column(table: str, schema: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_DROP_COLUMN_ON_SINGLE_FIELD_SCHEMA",
        f"Cannot drop column from a schema with a single column. Schema: {schema}",
        table=table,
    )


def change_column_not_supported(
    table: str, path: str, old_field: str, new_field: str
) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP",
        f"ALTER TABLE CHANGE COLUMN is not supported for changing column {path} from "
        f"{old_field} to {new_field}",
        table=table,
        help="only a comment, a position, DROP NOT NULL and (with delta.enableTypeWidening) "
        "a widening type change can be made in place.",
    )


def cannot_update_nested_type(table: str, kind: str, path: str) -> DeltaWriteError:
    return DeltaWriteError(
        f"DELTA_CANNOT_UPDATE_{kind.upper()}_FIELD",
        f"Cannot update {table} field {path} type: update {kind} by adding, deleting, or "
        "updating its fields",
        table=table,
    )


def dependent_constraints(table: str, column: str, constraints: Iterable[str]) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE",
        f"Cannot alter column {column} because this column is referenced by the following "
        f"check constraint(s): {', '.join(constraints)}",
        table=table,
        help="drop the constraint(s) first (ALTER TABLE ... DROP CONSTRAINT name).",
    )


def dependent_generated_columns(table: str, column: str, columns: Iterable[str]) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE",
        f"Cannot alter column {column} because this column is referenced by the following "
        f"generated column(s): {', '.join(columns)}",
        table=table,
    )


def column_not_found(table: str, column: str, schema: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA",
        f"Couldn't find column {column} in: {schema}",
        table=table,
    )


def duplicate_column(table: str, column: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_DUPLICATE_COLUMNS_FOUND",
        f"Found duplicate column(s) in the new schema: {column}",
        table=table,
    )


def cluster_by_on_partitioned_table(table: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED",
        "ALTER TABLE CLUSTER BY cannot be applied to a partitioned table.",
        table=table,
    )


def too_many_clustering_columns(table: str, count: int, limit: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS",
        f"CLUSTER BY supports up to {limit} clustering columns, but the table has {count} "
        "clustering columns. Please remove the extra clustering columns.",
        table=table,
    )


def clustering_columns_datatype_not_supported(table: str, described: str) -> InvalidArgumentError:
    """``described``: each column as ``name : TYPE``, comma-separated."""
    return InvalidArgumentError(
        "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED",
        f"CLUSTER BY is not supported because the following column(s): {described} don't "
        "support data skipping.",
        table=table,
        help="cluster by columns of types with min/max statistics.",
    )


def data_skipping_on_partition_column(table: str, column: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_PARTITIONED_COLUMN",
        f"Data skipping is not supported for partition column '{column}'.",
        table=table,
        help=f"leave {column} out of delta.dataSkippingStatsColumns (partition values are "
        "always used to skip files).",
    )


def duplicate_data_skipping_columns(table: str, columns: Iterable[str]) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_DUPLICATE_DATA_SKIPPING_COLUMNS",
        f"Duplicated data skipping columns found: {','.join(columns)}.",
        table=table,
        help="name each column once in delta.dataSkippingStatsColumns (a struct brings its "
        "fields).",
    )


def clustering_column_missing_stats(
    table: str, columns: str, stats_schema: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CLUSTERING_COLUMN_MISSING_STATS",
        "Clustering requires clustering columns to have stats. Couldn't find clustering "
        f"column(s) '{columns}' in stats schema:\n{stats_schema}",
        table=table,
        help="collect statistics on the column (delta.dataSkippingStatsColumns or "
        "delta.dataSkippingNumIndexedCols) or cluster by another one.",
    )


def data_skipping_not_supported_type(
    table: str, column: str, type_name: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE",
        f"Data skipping is not supported for column '{column}' of type {type_name}.",
        table=table,
        help=f"leave {column} out of delta.dataSkippingStatsColumns.",
    )
