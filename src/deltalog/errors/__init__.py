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


# Factories, by family; ``errors.<factory>`` stays the one way to build an error.
from deltalog.errors.conflicts import (  # noqa: E402 (after the classes they use)
    CONCURRENCY_HELP,
    concurrent_app_transaction,
    concurrent_append,
    concurrent_delete_delete,
    concurrent_delete_read,
    concurrent_domain_metadata,
    metadata_changed,
    protocol_changed,
    row_tracking_backfill_running_concurrently_with_unbackfill,
)
from deltalog.errors.dml import (  # noqa: E402 (after the classes they use)
    identity_explicit_insert,
    identity_update,
    merge_missing_when,
    merge_unresolved,
    multiple_source_rows_matched,
    non_deterministic_condition,
    non_last_clause_omits_condition,
    num_records_mismatch,
    unresolved_column,
    unsupported_subquery,
)
from deltalog.errors.log import (  # noqa: E402 (after the classes they use)
    checkpoint_snapshot_mismatch,
    corrupt_checkpoint,
    corrupt_commit,
    failed_integrity_check,
    invalid_argument,
    missing_checkpoint_parts,
    no_recreatable_history,
    state_recover_error,
    table_not_found,
    timestamp_earlier_than_retention,
    timestamp_greater_than_latest,
    truncated_log,
    unsupported_reader_features,
    unsupported_reader_version,
    version_not_found,
    versions_not_contiguous,
)
from deltalog.errors.row_tracking import (  # noqa: E402 (after the classes they use)
    row_tracking_not_preserved,
)
from deltalog.errors.writes import (  # noqa: E402 (after the classes they use)
    ambiguous_partition_column,
    cannot_modify_table_property,
    catalog_managed_write,
    column_default_not_evaluable,
    column_default_on_add_column,
    column_defaults_not_enabled,
    deletion_vector_size_mismatch,
    duplicate_columns,
    failed_to_merge_fields,
    features_require_manual_enablement,
    geospatial_srid_not_supported,
    identity_inconsistent_metadata,
    invalid_partition_column_type,
    invalid_table_property_value,
    merge_incompatible_datatype,
    merge_incompatible_decimal,
    non_partition_column_absent,
    partition_column_not_found,
    protocol_property_invalid,
    read_feature_protocol_requires_write,
    schema_mismatch,
    shredded_variant_unreadable,
    shredding_table_property_disabled,
    unknown_configuration,
    unsupported_data_type,
    unsupported_feature_status,
    unsupported_features_in_config,
    unsupported_writer_features,
    unsupported_writer_version,
)

__all__ = [
    "CONCURRENCY_HELP",
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "DeltaConcurrentModificationException",
    "DeltaError",
    "DeltaWriteError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidTableError",
    "MetadataChangedException",
    "ProtocolChangedException",
    "TableNotFoundError",
    "TimestampOutOfRangeError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "ambiguous_partition_column",
    "cannot_modify_table_property",
    "catalog_managed_write",
    "checkpoint_snapshot_mismatch",
    "column_default_not_evaluable",
    "column_default_on_add_column",
    "column_defaults_not_enabled",
    "concurrent_app_transaction",
    "concurrent_append",
    "concurrent_delete_delete",
    "concurrent_delete_read",
    "concurrent_domain_metadata",
    "corrupt_checkpoint",
    "corrupt_commit",
    "deletion_vector_size_mismatch",
    "duplicate_columns",
    "failed_integrity_check",
    "failed_to_merge_fields",
    "features_require_manual_enablement",
    "geospatial_srid_not_supported",
    "identity_explicit_insert",
    "identity_inconsistent_metadata",
    "identity_update",
    "invalid_argument",
    "invalid_partition_column_type",
    "invalid_table_property_value",
    "merge_incompatible_datatype",
    "merge_incompatible_decimal",
    "merge_missing_when",
    "merge_unresolved",
    "metadata_changed",
    "missing_checkpoint_parts",
    "multiple_source_rows_matched",
    "no_recreatable_history",
    "non_deterministic_condition",
    "non_last_clause_omits_condition",
    "non_partition_column_absent",
    "num_records_mismatch",
    "partition_column_not_found",
    "protocol_changed",
    "protocol_property_invalid",
    "read_feature_protocol_requires_write",
    "row_tracking_backfill_running_concurrently_with_unbackfill",
    "row_tracking_not_preserved",
    "schema_mismatch",
    "shredded_variant_unreadable",
    "shredding_table_property_disabled",
    "state_recover_error",
    "table_not_found",
    "timestamp_earlier_than_retention",
    "timestamp_greater_than_latest",
    "truncated_log",
    "unknown_configuration",
    "unresolved_column",
    "unsupported_data_type",
    "unsupported_feature_status",
    "unsupported_features_in_config",
    "unsupported_reader_features",
    "unsupported_reader_version",
    "unsupported_subquery",
    "unsupported_writer_features",
    "unsupported_writer_version",
    "version_not_found",
    "versions_not_contiguous",
]
