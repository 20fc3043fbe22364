"""A snapshot: the state of a table at one version (reference ``Snapshot``).

The non-file state (protocol, metadata, transactions, domain metadata) is always replayed on the
driver; it is small. The file state (live adds, tombstones) comes from one of two engines that give
the same answer: the driver engine (pyarrow, the default) or the Spark engine
(:mod:`deltalog.spark.read.state`), chosen by the size of the log unless overridden.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltalog import errors
from deltalog.actions import CommitInfo, DomainMetadata, Metadata, Protocol, SetTransaction
from deltalog.features import check_read_supported, is_feature_supported
from deltalog.log.checksum import checksum_mismatches
from deltalog.log.kernels import total
from deltalog.schema import StructType, parse_schema
from deltalog.table_properties import TableProperties

if TYPE_CHECKING:
    from deltalog.log.checkpoint_options import CheckpointOptions
    from deltalog.log.checksum import VersionChecksum
    from deltalog.log.replay import InMemoryLogReplay
    from deltalog.log.segment import LogSegment
    from deltalog.storage.base import LogStore


class Snapshot:
    """An immutable view of one table version.

    Built by :class:`deltalog.DeltaLog`; do not construct directly.
    """

    def __init__(
        self,
        table_root: str,
        segment: LogSegment,
        replay: InMemoryLogReplay,
        *,
        engine: str,
        last_commit_info: CommitInfo | None,
        spark_state: Any = None,
    ) -> None:
        self.table_root = table_root
        self.segment = segment
        self.engine = engine
        self._replay = replay
        self._last_commit_info = last_commit_info
        self._spark_state = spark_state  # spark.read.state.SparkState when engine == "spark"
        self._checksum: VersionChecksum | None = None
        if replay.current_protocol is None:
            raise errors.state_recover_error(table_root, "protocol", segment.version)
        if replay.current_metadata is None:
            raise errors.state_recover_error(table_root, "metadata", segment.version)
        check_read_supported(replay.current_protocol, table_root)
        now = int(time.time() * 1000)
        self.properties = TableProperties(replay.current_metadata.configuration, table_root)
        replay.min_file_retention_timestamp = (
            now - self.properties.deleted_file_retention_duration_ms
        )
        txn_retention = self.properties.set_transaction_retention_duration_ms
        replay.min_set_transaction_retention_timestamp = (
            None if txn_retention is None else now - txn_retention
        )

    # -- identity ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self.segment.version

    @property
    def protocol(self) -> Protocol:
        assert self._replay.current_protocol is not None
        return self._replay.current_protocol

    @property
    def metadata(self) -> Metadata:
        assert self._replay.current_metadata is not None
        return self._replay.current_metadata

    @property
    def timestamp(self) -> int:
        """The version's timestamp (ms): its in-commit timestamp when the table uses them,
        else the modification time of the version's commit file."""
        ict = self._last_commit_info.in_commit_timestamp if self._last_commit_info else None
        if ict is not None and self.in_commit_timestamps_enabled:
            return ict
        return self.segment.last_commit_timestamp

    @property
    def in_commit_timestamps_enabled(self) -> bool:
        return (
            is_feature_supported(self.protocol, "inCommitTimestamp")
            and self.properties.enable_in_commit_timestamps
        )

    # -- schema -----------------------------------------------------------------------------

    @property
    def schema(self) -> StructType:
        """The table schema (an empty struct for the rare legacy metadata without one).

        Raises:
            InvalidTableError: the schema string does not parse.
        """
        if self.metadata.schema_string is None:
            return StructType(())
        try:
            return parse_schema(self.metadata.schema_string)
        except (ValueError, KeyError, TypeError) as e:
            raise errors.InvalidTableError(
                "DELTA_INVALID_SCHEMA",
                f"the schema of version {self.version} cannot be parsed: {e}.",
                table=self.table_root,
            ) from None

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def column_mapping_mode(self) -> str:
        """``none``, ``name`` or ``id``; honoured only when the protocol supports the feature."""
        if not is_feature_supported(self.protocol, "columnMapping"):
            return "none"
        return self.properties.column_mapping_mode

    @property
    def string_prefix_length(self) -> int:
        """The prefix string statistics are cut to (``delta.dataSkippingStringPrefixLength``,
        32 by default)."""
        return self.properties.data_skipping_string_prefix_length or 32

    def files_for_filter(self, where: str | None, *, time_zone: str = "UTC") -> pa.Table:
        """The live files that may hold rows matching the SQL filter ``where`` (all for
        ``None`` or a filter outside the subset data skipping reads): partition pruning and
        min/max/null-count skipping, :mod:`deltalog.scan.skipping`."""
        # Imported here: skipping needs pyarrow.compute, which loading a snapshot never does.
        from deltalog.scan.skipping import prune_where

        return prune_where(
            self.all_files_arrow(),
            self.schema,
            self.partition_columns,
            where,
            column_mapping=self.column_mapping_mode != "none",
            time_zone=time_zone,
            table_root=self.table_root,
            string_prefix_length=self.string_prefix_length,
        )

    # -- non-file state ---------------------------------------------------------------------

    @property
    def set_transactions(self) -> list[SetTransaction]:
        return self._replay.set_transactions()

    def transaction_version(self, app_id: str) -> int | None:
        """The latest version ``app_id`` committed (idempotent writes), if any."""
        for t in self.set_transactions:
            if t.app_id == app_id:
                return t.version
        return None

    @property
    def domain_metadata(self) -> list[DomainMetadata]:
        return self._replay.active_domain_metadata()

    @property
    def commit_info(self) -> CommitInfo | None:
        """The ``commitInfo`` of this version's commit, when the log kept it."""
        return self._last_commit_info

    # -- file state -------------------------------------------------------------------------

    def all_files_arrow(self) -> pa.Table:
        """Live ``add`` actions, columns named as in the log (``path``, ``partitionValues``...)."""
        if self._spark_state is not None:
            return self._spark_state.active_files()
        return self._replay.active_files()

    def tombstones_arrow(self) -> pa.Table:
        """Unexpired ``remove`` actions, columns named as in the log."""
        if self._spark_state is not None:
            return self._spark_state.tombstones()
        return self._replay.tombstones()

    def write_sidecars(self, store: LogStore, options: CheckpointOptions) -> list[Any] | None:
        """This version's file actions written as V2 checkpoint sidecars by the snapshot's
        engine (a list of ``checkpoint_writer.WrittenSidecar``, checked to hold every live file
        of the state), or ``None`` when the driver writes them (the driver engine, or a Spark
        state below its threshold)."""
        write = getattr(self._spark_state, "write_sidecars", None)
        if write is None:
            return None
        result: list[Any] | None = write(store, self.version, options)
        return result

    @property
    def num_of_files(self) -> int:
        return self.all_files_arrow().num_rows

    @property
    def size_in_bytes(self) -> int:
        return total(self.all_files_arrow()["size"])

    # -- version checksum -------------------------------------------------------------------

    @property
    def checksum(self) -> VersionChecksum | None:
        """This version's checksum (its ``.crc`` file, read and validated when the snapshot was
        loaded, or the one the writer of this version computed); ``None`` when there is none,
        it did not parse, or it disagreed with the state."""
        return self._checksum

    def attach_checksum(self, checksum: VersionChecksum | None) -> None:
        """Set (or, with ``None``, forget) this version's checksum: the next commit derives its
        own checksum from it instead of from the state."""
        self._checksum = checksum

    def validate_checksum(self) -> None:
        """Check this version's checksum against the replayed state (protocol, metadata and,
        when the driver holds the files, ``numFiles``, ``tableSizeBytes`` and the
        deletion-vector counts); a no-op without a checksum. On a mismatch the checksum is
        forgotten, then the error raised.

        Raises:
            InvalidTableError: ``DELTA_TXN_LOG_FAILED_INTEGRITY``, naming the fields that differ.
        """
        if self._checksum is None:
            return
        mismatches = checksum_mismatches(self._checksum, self)
        if mismatches:
            self._checksum = None
            raise errors.failed_integrity_check(self.table_root, self.version, mismatches)

    def uncache(self) -> None:
        """Drop cached engine state (the Spark engine's persisted DataFrame)."""
        if self._spark_state is not None:
            self._spark_state.uncache()

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary, in the spirit of ``DESCRIBE DETAIL``."""
        md, proto = self.metadata, self.protocol
        files = self.all_files_arrow()
        return {
            "tableRoot": self.table_root,
            "version": self.version,
            "timestamp": self.timestamp,
            "id": md.id,
            "name": md.name,
            "description": md.description,
            "format": md.format.provider,
            "partitionColumns": list(md.partition_columns),
            "numFiles": files.num_rows,
            "sizeInBytes": total(files["size"]),
            "properties": dict(md.configuration),
            "minReaderVersion": proto.min_reader_version,
            "minWriterVersion": proto.min_writer_version,
            "readerFeatures": list(proto.reader_features or []),
            "writerFeatures": list(proto.writer_features or []),
            "schema": md.schema_string,
            "checkpointVersion": self.segment.checkpoint_version,
            "createdTime": md.created_time,
        }

    def __repr__(self) -> str:
        return (
            f"Snapshot(table={self.table_root!r}, version={self.version}, engine={self.engine!r})"
        )
