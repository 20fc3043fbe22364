"""Errors of OPTIMIZE, with the reference's error classes and messages."""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import InvalidArgumentError

ZORDER_STATS_CHECK_CONF = "spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled"


def non_partition_column_reference(
    column: str, partition_columns: Iterable[str], table: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_NON_PARTITION_COLUMN_REFERENCE",
        f"Predicate references non-partition column '{column}'. Only the partition columns "
        f"may be referenced: [{', '.join(partition_columns)}]",
        table=table,
    )


def z_ordering_on_partition_column(column: str, table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_ZORDERING_ON_PARTITION_COLUMN",
        f"{column} is a partition column. Z-Ordering can only be performed on data columns",
        table=table,
    )


def z_ordering_column_does_not_exist(column: str, table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST",
        f"Z-Ordering column {column} does not exist in data schema.",
        table=table,
    )


def operation_not_supported_for_data_types(
    operation: str, column: str, type_name: str, table: str, help: str | None = None
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES",
        f"{operation} is not supported for data types: {column}: {type_name}.",
        table=table,
        help=help or f"leave column {column} out of the {operation} columns.",
    )


def z_ordering_on_column_without_stats(columns: Iterable[str], table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS",
        f"Z-Ordering on [{', '.join(columns)}] will be ineffective, because we currently do not "
        f"collect stats for these columns. You can disable this check by setting "
        f"SET {ZORDER_STATS_CHECK_CONF} = false",
        table=table,
    )


def failed_recognize_predicate(where: str, reason: str, table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_FAILED_RECOGNIZE_PREDICATE",
        f"Cannot recognize the predicate '{where}': {reason}",
        table=table,
        help="write the partition filter as a Spark SQL boolean expression over partition columns.",
    )


def subquery_in_partition_predicate(where: str, table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNSUPPORTED_SUBQUERY_IN_PARTITION_PREDICATES",
        f"Subquery is not supported in partition predicates: {where!r}.",
        table=table,
    )


def unsupported_predicate(where: str, reason: str, table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_UNSUPPORTED_PREDICATE",
        f"cannot parse the OPTIMIZE partition filter {where!r}: {reason}",
        table=table,
    )


def clustering_with_partition_predicate(
    predicates: Iterable[str], table: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CLUSTERING_WITH_PARTITION_PREDICATE",
        "OPTIMIZE command for Delta table with Liquid clustering doesn't support partition "
        f"predicates. Please remove the predicates: {', '.join(predicates)}.",
        table=table,
        help="run OPTIMIZE without WHERE: clustering decides which files to rewrite.",
    )


def clustering_with_z_order_by(columns: Iterable[str], table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_CLUSTERING_WITH_ZORDER_BY",
        "OPTIMIZE command for Delta table with Liquid clustering cannot specify ZORDER BY. "
        f"Please remove ZORDER BY ({', '.join(columns)}).",
        table=table,
        help="use executeCompaction(): it clusters by the table's clustering columns.",
    )
