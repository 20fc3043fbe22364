"""Errors of DELETE, UPDATE and MERGE, with the reference's error classes and messages."""

from __future__ import annotations

from collections.abc import Iterable

from deltalog.errors import DeltaWriteError, InvalidArgumentError, UnsupportedFeatureError


def multiple_source_rows_matched(table: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE",
        "Cannot perform Merge as multiple source rows matched and attempted to modify the same "
        "target row in the Delta table in possibly conflicting ways. By SQL semantics of Merge, "
        "when multiple source rows match on the same target row, the result may be ambiguous "
        "as it is unclear which source row should be used to update or delete the matching "
        "target row. Nothing was changed.",
        table=table,
        help="preprocess the source to eliminate the possibility of multiple matches, e.g. "
        "deduplicate it on the merge keys.",
    )


def merge_missing_when(table: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_MERGE_MISSING_WHEN",
        "There must be at least one WHEN clause in a MERGE statement.",
        table=table,
    )


_KIND_NAMES = {
    "matched": ("DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION", "MATCHED"),
    "notMatched": ("DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION", "NOT MATCHED"),
    "notMatchedBySource": (
        "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
        "NOT MATCHED BY SOURCE",
    ),
}


def non_last_clause_omits_condition(kind: str, table: str) -> InvalidArgumentError:
    error_class, words = _KIND_NAMES[kind]
    return InvalidArgumentError(
        error_class,
        f"When there are more than one {words} clauses in a MERGE statement, only the last "
        f"{words} clause can omit the condition.",
        table=table,
    )


def merge_unresolved(
    expression: str, clause: str, names: Iterable[str], table: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        f"Cannot resolve {expression} in {clause} given columns {', '.join(names)}.",
        table=table,
    )


def unresolved_column(
    name: str, clause: str, names: Iterable[str], table: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        "UNRESOLVED_COLUMN",
        f"A column with name `{name}` cannot be resolved in {clause}; the table's columns are "
        f"{', '.join(names)}.",
        table=table,
    )


def identity_update(name: str, table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED",
        f"UPDATE on IDENTITY column {name} is not supported.",
        table=table,
    )


def identity_explicit_insert(name: str, table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED",
        f"Providing values for GENERATED ALWAYS AS IDENTITY column {name} is not supported.",
        table=table,
    )


def num_records_mismatch(operation: str, added: int, removed: int, table: str) -> DeltaWriteError:
    return DeltaWriteError(
        "DELTA_NUM_RECORDS_MISMATCH",
        f"Failed to validate the number of records in {operation}. Added {added} records and "
        f"removed {removed} records. Nothing was committed.",
        table=table,
        help="this is a bug in deltalog; please report it with the table's last commits.",
    )


def unsupported_subquery(operation: str, condition: str, table: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_SUBQUERY",
        f"Subqueries are not supported in the {operation} (condition = {condition}).",
        table=table,
        help="compute the subquery's result first (e.g. collect the keys, or MERGE with it as "
        "the source) and give the condition its values.",
    )


def non_deterministic_condition(
    operation: str, condition: str, table: str
) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED",
        f"Non-deterministic functions are not supported in the {operation} "
        f"(condition = {condition}).",
        table=table,
        help="use a condition whose value depends on the row alone.",
    )
