"""deltalog's errors as PySpark's exception classes, where a Spark user catches them.

delta-spark's errors reach Python as PySpark exceptions: its ``DeltaAnalysisException`` is caught
as ``pyspark.errors.AnalysisException``, ``DeltaIllegalArgumentException`` as
``IllegalArgumentException``, ``DeltaUnsupportedOperationException`` as
``UnsupportedOperationException``, the commit conflicts of ``delta.exceptions`` are
``PySparkException`` subclasses, and everything else is some other ``PySparkException``. Code
written for delta-spark catches those classes, so an error leaving deltalog's Spark API must be
one of them too.

The pure core cannot import pyspark, so its errors keep plain bases. At the Spark layer's public
entry points (:func:`surfaces` on a function, :func:`surfaces_all` on a class) a
:class:`~deltalog.errors.DeltaError` is re-raised as an instance of a *captured* class: a
subclass of both the core class and the PySpark class the reference raises for that error
class. ``except deltalog.errors.X``, ``except deltalog.exceptions.X`` and
``except AnalysisException`` all catch it; its ``str`` and attributes are the core error's.

Which PySpark class: the reference's exception for the error class where deltalog uses one of
the reference's error classes (:data:`_BY_ERROR_CLASS`, read from delta-spark's
``DeltaErrors``), else the default for the deltalog family (:data:`_BY_FAMILY`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import pyspark.errors as pyspark_errors
from pyspark.errors import PySparkException

from deltalog import errors

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

_ANALYSIS = "AnalysisException"
_PARSE = "ParseException"
_ILLEGAL_ARGUMENT = "IllegalArgumentException"
_UNSUPPORTED = "UnsupportedOperationException"
_OTHER = "PySparkException"

# The PySpark class each error class deltalog raises reaches Python as under delta-spark: for
# Delta's error classes, by the Scala exception DeltaErrors builds it with; for Spark's, Spark's.
_BY_ERROR_CLASS: dict[str, str] = {
    **dict.fromkeys(
        (
            "DATA_SOURCE_NOT_FOUND",
            "DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED",
            "DELTA_AMBIGUOUS_PARTITION_COLUMN",
            "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE",
            "DELTA_CANNOT_REPLACE_MISSING_TABLE",
            "DELTA_CANNOT_RESTORE_TABLE_VERSION",
            "DELTA_CANNOT_RESTORE_TIMESTAMP_EARLIER",
            "DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER",
            "DELTA_CANNOT_SET_LOCATION_ON_PATH_IDENTIFIER",
            "DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION",
            "DELTA_CLUSTERING_WITH_ZORDER_BY",
            "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS",
            "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY",
            "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA",
            "DELTA_CONSTRAINT_ALREADY_EXISTS",
            "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE",
            "DELTA_CONSTRAINT_DOES_NOT_EXIST",
            "DELTA_CONVERT_NON_PARQUET_TABLE",
            "DELTA_CREATE_TABLE_SCHEME_MISMATCH",
            "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
            "DELTA_DATA_CHANGE_FALSE",
            "DELTA_DROP_COLUMN_ON_SINGLE_FIELD_SCHEMA",
            "DELTA_FAILED_TO_MERGE_FIELDS",
            "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE",
            "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED",
            "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED",
            "DELTA_IDENTITY_COLUMN_INCONSISTENT_METADATA",
            "DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING",
            "DELTA_INVALID_PARTITION_COLUMN_TYPE",
            "DELTA_MERGE_INCOMPATIBLE_DATATYPE",
            "DELTA_MERGE_INCOMPATIBLE_DECIMAL_TYPE",
            "DELTA_MERGE_MISSING_WHEN",
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
            "DELTA_METADATA_MISMATCH",
            "DELTA_MISSING_CHANGE_DATA",
            "DELTA_MISSING_DELTA_TABLE",
            "DELTA_MISSING_PROVIDER_FOR_CONVERT",
            "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION",
            "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
            "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
            "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
            "DELTA_NON_PARTITION_COLUMN_REFERENCE",
            "DELTA_NO_RECREATABLE_HISTORY_FOUND",
            "DELTA_NO_START_FOR_CDC_READ",
            "DELTA_PARTITION_COLUMN_NOT_FOUND",
            "DELTA_PATH_EXISTS",
            "DELTA_REPLACE_WHERE_MISMATCH",
            "DELTA_SET_LOCATION_SCHEMA_MISMATCH",
            "DELTA_TABLE_ALREADY_EXISTS",
            "DELTA_TIMESTAMP_INVALID",
            "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME",
            "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME",
            "DELTA_UNKNOWN_CONFIGURATION",
            "DELTA_UNSET_NON_EXISTENT_PROPERTY",
            "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP",
            "DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN",
            "DELTA_UNSUPPORTED_DROP_COLUMN",
            "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN",
            "DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING",
            "DELTA_UNSUPPORTED_OUTPUT_MODE",
            "DELTA_UNSUPPORTED_RENAME_COLUMN",
            "DELTA_VERSION_INVALID",
            "DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS",
            "INSERT_COLUMN_ARITY_MISMATCH",
            "INVALID_QUERY_MIXED_QUERY_PARAMETERS",
            "TABLE_OR_VIEW_ALREADY_EXISTS",
            "TABLE_OR_VIEW_NOT_FOUND",
            "UNBOUND_SQL_PARAMETER",
            "UNRESOLVED_COLUMN",
            "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED",
            "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED",
            "DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED",
            "DELTA_IDENTITY_COLUMNS_ALTER_NON_IDENTITY_COLUMN",
            "DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP",
            "DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED",
            "DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION",
            "INVALID_DEFAULT_VALUE.SUBQUERY_EXPRESSION",
        ),
        _ANALYSIS,
    ),
    "PARSE_SYNTAX_ERROR": _PARSE,
    **dict.fromkeys(
        (
            "DELTA_CDC_START_VERSION_AFTER_LATEST",
            "DELTA_DUPLICATE_DOMAIN_METADATA_INTERNAL_ERROR",
            "DELTA_ILLEGAL_OPTION",
            "DELTA_INVALID_CDC_RANGE",
            "DELTA_INVALID_CLONE_PATH",
            "DELTA_MODE_NOT_SUPPORTED",
            "DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE",
            "DELTA_PROTOCOL_PROPERTY_NOT_INT",
            "DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE",
            "DELTA_STARTING_VERSION_AND_TIMESTAMP_BOTH_SET",
            "DELTA_UNSUPPORTED_CLONE_REPLACE_SAME_TABLE",
            "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE",
            "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT",
            "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST",
            "DELTA_ZORDERING_ON_PARTITION_COLUMN",
        ),
        _ILLEGAL_ARGUMENT,
    ),
    **dict.fromkeys(
        (
            "DELTA_CANNOT_MODIFY_APPEND_ONLY",
            "DELTA_CANNOT_MODIFY_TABLE_PROPERTY",
            "DELTA_CLUSTERING_WITH_PARTITION_PREDICATE",
            "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE",
            "DELTA_SOURCE_IGNORE_DELETE",
            "DELTA_SOURCE_TABLE_IGNORE_CHANGES",
            "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS",
        ),
        _UNSUPPORTED,
    ),
    # Table-feature, state, file and invariant errors are Java runtime, state or IO exceptions
    # in the reference, which PySpark has no class for: only ``PySparkException`` catches them.
    **dict.fromkeys(
        (
            "DELTA_CANNOT_VACUUM_LITE",
            "DELTA_CHECKPOINT_SNAPSHOT_MISMATCH",
            "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH",
            "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH",
            "DELTA_DELETION_VECTOR_SIZE_MISMATCH",
            "DELTA_DUPLICATE_ACTIONS_FOUND",
            "DELTA_FAILED_CAST_PARTITION_VALUE",
            "DELTA_FAILED_MERGE_SCHEMA_FILE",
            "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT",
            "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION",
            "DELTA_FEATURE_DROP_CHECKPOINT_FAILED",
            "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_WAIT_FOR_RETENTION_PERIOD",
            "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL",
            "DELTA_FEATURE_DROP_DEPENDENT_FEATURE",
            "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY",
            "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT",
            "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST",
            "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED",
            "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE",
            "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE",
            "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD",
            "DELTA_FILE_NOT_FOUND",
            "DELTA_INVALID_FORMAT_FROM_SOURCE_VERSION",
            "DELTA_INVALID_PARTITIONING_SCHEMA",
            "DELTA_MAX_COMMIT_RETRIES_EXCEEDED",
            "DELTA_METADATA_ABSENT",
            "DELTA_MISSING_FILES_UNEXPECTED_VERSION",
            "DELTA_MISSING_PART_FILES",
            "DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
            "DELTA_NUM_RECORDS_MISMATCH",
            "DELTA_READ_FEATURE_PROTOCOL_REQUIRES_WRITE",
            "DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA",
            "DELTA_STATE_RECOVER_ERROR",
            "DELTA_TRUNCATED_TRANSACTION_LOG",
            "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
            "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
            "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG",
            "DELTA_UNSUPPORTED_FEATURE_STATUS",
            "DELTA_UNSUPPORTED_NON_EMPTY_CLONE",
            "DELTA_VERSIONS_NOT_CONTIGUOUS",
            "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
            "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE",
        ),
        _OTHER,
    ),
}

# A family's PySpark class when its error class is not listed above, most specific first.
_BY_FAMILY: tuple[tuple[type[errors.DeltaError], str], ...] = (
    (errors.DeltaConcurrentModificationException, _OTHER),
    (errors.InvalidArgumentError, _ILLEGAL_ARGUMENT),
    (errors.UnsupportedFeatureError, _UNSUPPORTED),
    (errors.TableNotFoundError, _ANALYSIS),
    (errors.VersionNotFoundError, _ANALYSIS),
    (errors.TimestampOutOfRangeError, _ANALYSIS),
    (errors.DeltaWriteError, _ANALYSIS),
)

# delta-spark's SQLSTATE for the concurrency family (every other error answers None).
_CONCURRENT_SQLSTATE = "2D521"


def spark_class_name(error: errors.DeltaError) -> str:
    """The name of the PySpark exception class delta-spark raises for ``error``."""
    named = _BY_ERROR_CLASS.get(error.error_class)
    if named is not None:
        return named
    for family, name in _BY_FAMILY:
        if isinstance(error, family):
            return name
    return _OTHER


def captured(error: errors.DeltaError) -> errors.DeltaError:
    """``error`` as an instance of its captured class (itself when already one): same
    attributes, message, cause and traceback, and also an instance of the PySpark class."""
    if isinstance(error, PySparkException):
        return error
    cls = _captured_class(type(error), spark_class_name(error))
    twin = cls.__new__(cls)
    twin.__dict__.update(error.__dict__)
    twin.args = error.args
    twin.__cause__ = error.__cause__
    twin.__suppress_context__ = error.__suppress_context__
    twin.__context__ = error.__context__
    return twin.with_traceback(error.__traceback__)


def surfaces(fn: F) -> F:
    """Decorate a public Spark-layer callable: a :class:`DeltaError` it raises leaves it
    captured (see the module docstring)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except errors.DeltaError as e:
            raise captured(e) from e.__cause__

    setattr(wrapper, "_deltalog_surfaces", True)  # noqa: B010
    return wrapper  # type: ignore[return-value]


def surfaces_all(cls: C) -> C:
    """Apply :func:`surfaces` to every public method, classmethod and staticmethod that
    ``cls`` itself defines."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(member, classmethod | staticmethod):
            kind = type(member)
            setattr(cls, name, kind(surfaces(member.__func__)))
        elif callable(member) and not isinstance(member, type):
            setattr(cls, name, surfaces(member))
    return cls


_CLASSES: dict[tuple[type[errors.DeltaError], str], type[errors.DeltaError]] = {}


def _captured_class(core: type[errors.DeltaError], spark_name: str) -> type[errors.DeltaError]:
    """One class per (core class, PySpark class), so ``type(e)`` is stable across raises."""
    known = _CLASSES.get((core, spark_name))
    if known is None:
        known = _CLASSES[(core, spark_name)] = _new_class(core, spark_name)
    return known


def _new_class(core: type[errors.DeltaError], spark_name: str) -> type[errors.DeltaError]:
    base = getattr(pyspark_errors, spark_name)
    namespace = {
        "__module__": core.__module__,
        "__qualname__": core.__qualname__,
        "__doc__": core.__doc__,
        **{name: getattr(_PySparkFace, name) for name in _FACE},
    }
    return type(core.__name__, (core, base), namespace)


class _PySparkFace:
    """PySpark's exception methods answered from the core error's own fields, so they do not
    depend on PySpark's private attributes (which differ between 3.5 and 4.x)."""

    def __str__(self: Any) -> str:
        return Exception.__str__(self)

    def getCondition(self: Any) -> str:
        return str(self.error_class)

    def getErrorClass(self: Any) -> str:
        return str(self.error_class)

    def getMessage(self: Any) -> str:
        return Exception.__str__(self)

    def getMessageParameters(self: Any) -> dict[str, str]:
        return {}

    def getQueryContext(self: Any) -> list[Any]:
        return []

    def getSqlState(self: Any) -> str | None:
        if isinstance(self, errors.DeltaConcurrentModificationException):
            return _CONCURRENT_SQLSTATE
        return None


_FACE = (
    "__str__",
    "getCondition",
    "getErrorClass",
    "getMessage",
    "getMessageParameters",
    "getQueryContext",
    "getSqlState",
)
