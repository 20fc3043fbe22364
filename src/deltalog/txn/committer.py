"""The commit path (reference ``OptimisticTransactionImpl.commit`` / ``doCommitRetryIteratively``).

1. :func:`prepare` validates the actions against the table (metadata present on a new table,
   protocol raised to what the metadata needs and writable by deltalog, partition values keyed
   by the partition columns, append-only tables, duplicates), gives new files their row ids
   when the table tracks rows (:mod:`deltalog.row_tracking`; a rewrite that would lose them
   is refused) and decides the isolation level.
2. Each attempt builds ``commitInfo`` (first line; in-commit timestamp when the table has them)
   and writes ``<version>.json`` put-if-absent through the store: the file appears whole or
   not at all, and an existing commit is never overwritten.
3. When the version exists, every winning commit up to the latest is checked with the
   reference's rules (:func:`deltalog.txn.conflicts.check_conflicts`); no conflict means retry
   at the next version at once (no sleep, as the reference), a conflict raises its exception.
4. Post-commit hooks run on the committed version (:mod:`deltalog.txn.hooks`), the version
   checksum first (derived from what was just written); their failures are logged, never
   raised: the commit has happened.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from typing import Protocol as TypingProtocol

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import column_defaults, errors, row_tracking
from deltalog.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltalog.errors import row_tracking as rt_errors
from deltalog.features import (
    CATALOG_MANAGED,
    check_write_supported,
    is_feature_supported,
    protocol_for_table,
    reader_features,
    writer_features,
)
from deltalog.log.filenames import commit_name
from deltalog.schema import StructType, parse_schema
from deltalog.skipping_columns import validate_stats_columns
from deltalog.table_properties import TableProperties
from deltalog.txn.conflicts import check_conflicts, in_commit_timestamp_after
from deltalog.txn.hooks import CommittedVersion, run_post_commit_hooks
from deltalog.txn.operations import Operation, build_commit_info, new_txn_id
from deltalog.txn.read_set import SERIALIZABLE, SNAPSHOT_ISOLATION, PendingCommit
from deltalog.txn.winning_commit import WinningCommit

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.log.snapshots import SnapshotManagement
    from deltalog.txn.read_set import ReadSet

log = logging.getLogger(__name__)


class TransactionState(TypingProtocol):
    """What the committer reads of a transaction (:class:`deltalog.txn.transaction.Transaction`
    is one): declared here so that the commit path does not depend on the class that calls it."""

    log: SnapshotManagement
    read_set: ReadSet
    isolation_level: str | None
    user_metadata: str | None
    allow_protocol_downgrade: bool
    row_tracking_preserved: bool

    @property
    def snapshot(self) -> Snapshot | None: ...

    @property
    def table_root(self) -> str: ...

    @property
    def read_version(self) -> int: ...

    @property
    def new_metadata(self) -> Metadata | None: ...

    @property
    def new_protocol(self) -> Protocol | None: ...


# The reference allows ten million conflict-free retries; a bound keeps a livelock finite.
MAX_COMMIT_ATTEMPTS = 10_000_000
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


def commit(
    txn: TransactionState,
    actions: list[Action],
    operation: Operation,
    *,
    tags: Mapping[str, str] | None = None,
    skip_empty: bool = False,
) -> int | None:
    """Commit ``actions`` for ``txn``; returns the version, or ``None`` when ``skip_empty`` and
    there is nothing to commit. See the module docstring for the steps."""
    pending = prepare(txn, actions, operation.name, tags)
    if skip_empty and not pending.actions:
        return None
    txn_id = new_txn_id()
    attempt = txn.read_version + 1
    own_ict: int | None = None
    for _ in range(MAX_COMMIT_ATTEMPTS):
        now = int(time.time() * 1000)
        ict = _in_commit_timestamp(txn, pending, now, own_ict)
        own_ict = ict
        actions_now = _with_ict_enablement(txn, pending, attempt, ict)
        info = build_commit_info(
            operation,
            timestamp=now,
            read_version=txn.read_version,
            isolation_level=pending.isolation_level,
            is_blind_append=pending.is_blind_append,
            txn_id=txn_id,
            in_commit_timestamp=ict,
            user_metadata=txn.user_metadata,
            tags=_with_row_tracking_tag(tags, pending.row_tracking_preserved),
        )
        data = serialize([info, *actions_now])
        path = f"{txn.log.log_root}/{commit_name(attempt)}"
        try:
            txn.log.store.write_if_absent(path, data)
        except FileExistsError:
            pending, attempt, own_ict = _resolve_conflicts(txn, pending, attempt, own_ict)
            continue
        log.info("Committed version %d of %s (%s)", attempt, txn.table_root, operation.name)
        committed = CommittedVersion(txn.snapshot, (info, *actions_now), txn_id, operation.name)
        run_post_commit_hooks(txn.log, attempt, committed)
        return attempt
    raise errors.DeltaConcurrentModificationException(
        "DELTA_MAX_COMMIT_RETRIES_EXCEEDED",
        f"This commit has failed as it has been tried {MAX_COMMIT_ATTEMPTS} times but did not "
        f"succeed; the last attempted version was {attempt}.",
        table=txn.table_root,
        help="the table is under heavy concurrent writes; retry later.",
    )


def serialize(actions: list[Action]) -> bytes:
    """The bytes of a commit file: one JSON action per line, newline-terminated."""
    return "".join(a.to_json() + "\n" for a in actions).encode("utf-8")


# -- preparation --------------------------------------------------------------------------------


def prepare(
    txn: TransactionState,
    actions: list[Action],
    operation: str = "",
    tags: Mapping[str, str] | None = None,
) -> PendingCommit:
    """Validate ``actions`` and fold in the transaction's metadata and protocol changes; on a
    table with row tracking, assign row ids and commit versions (:mod:`deltalog.row_tracking`).

    Raises:
        DeltaWriteError, UnsupportedFeatureError, InvalidArgumentError: see the module docstring.
    """
    table = txn.table_root
    _check_last_commit_not_empty(txn)
    metadata = _single(txn, actions, Metadata, txn.new_metadata)
    protocol = _single(txn, actions, Protocol, txn.new_protocol)
    assert metadata is None or isinstance(metadata, Metadata)
    assert protocol is None or isinstance(protocol, Protocol)
    others = [a for a in actions if not isinstance(a, Metadata | Protocol | CommitInfo)]
    current_protocol = txn.snapshot.protocol if txn.snapshot is not None else None
    if txn.snapshot is None and metadata is None:
        raise errors.DeltaWriteError(
            "DELTA_METADATA_ABSENT",
            "Couldn't find Metadata while committing the first version of the Delta table.",
            table=table,
            help="create the table with a schema first (a write in a create mode, or "
            "DeltaTable.create).",
        )
    if metadata is not None:
        metadata, protocol = _upgrade_protocol(txn, metadata, protocol, current_protocol)
        if (final_protocol := protocol or current_protocol) is not None:
            old = txn.snapshot.metadata if txn.snapshot is not None else None
            metadata = row_tracking.with_column_names(final_protocol, old, metadata)
            metadata = _column_defaults(final_protocol, old, metadata, operation, table)
    # Only DROP FEATURE may lower a protocol.
    if protocol is not None and current_protocol is not None and not txn.allow_protocol_downgrade:
        _check_no_downgrade(table, current_protocol, protocol)
    effective_protocol = protocol or current_protocol
    effective_metadata = metadata or (txn.snapshot.metadata if txn.snapshot else None)
    assert effective_protocol is not None and effective_metadata is not None
    if current_protocol is not None and is_feature_supported(current_protocol, CATALOG_MANAGED):
        raise errors.catalog_managed_write(table)  # dropping it, too, is the catalog's commit
    check_write_supported(effective_protocol, table, enabling=True)
    _check_partition_values(table, effective_metadata, others)
    _check_append_only(table, effective_metadata, others)
    _check_duplicates(table, others)
    tracked = _row_tracking(txn, effective_protocol, effective_metadata, others, operation, tags)
    head: list[Action] = []
    if protocol is not None and protocol != current_protocol:
        head.append(protocol)
    if metadata is not None:
        head.append(metadata)
    final = tuple(head + list(tracked.actions))
    isolation = _isolation_level(txn, effective_metadata, final)
    return PendingCommit(
        txn.snapshot,
        txn.read_set,
        isolation,
        final,
        operation,
        tracked.high_water_mark,
        tracked.preserved,
    )


def _column_defaults(
    protocol: Protocol, old: Metadata | None, new: Metadata, operation: str, table: str
) -> Metadata:
    """``new`` checked for column defaults the protocol does not allow
    (:func:`deltalog.column_defaults.check_commit`); a created or replaced table's schema loses
    Spark's ``EXISTS_DEFAULT`` keys, as in the reference."""
    column_defaults.check_commit(protocol, old, new, operation, table)
    text = new.schema_string
    if text is None or column_defaults.EXISTS_DEFAULT not in text:
        return new
    if not operation.upper().startswith(("CREATE", "REPLACE")):
        return new
    schema = column_defaults.without_exists_default(parse_schema(text))
    return replace(new, schema_string=schema.to_json())


@dataclass(frozen=True, slots=True)
class _Tracked:
    actions: tuple[Action, ...]
    high_water_mark: int
    preserved: bool | None


def _row_tracking(
    txn: TransactionState,
    protocol: Protocol,
    metadata: Metadata,
    actions: list[Action],
    operation: str,
    tags: Mapping[str, str] | None,
) -> _Tracked:
    """Row ids and commit versions for ``actions`` (reference ``RowId.assignFreshRowIds`` and
    ``DefaultRowCommitVersion.assignIfMissing``), and the ``preserved`` tag to write.

    Raises:
        UnsupportedFeatureError: a rewriting command on a table with row tracking enabled adds
            new files without saying it carried the rows' ids over (it would lose them), or
            the commit enables row tracking on files without row ids.
        DeltaWriteError: a new file without ``numRecords``.
    """
    table = txn.table_root
    snapshot = txn.snapshot
    read_mark = row_tracking.MISSING_HIGH_WATER_MARK
    if snapshot is not None and row_tracking.is_supported(snapshot.protocol):
        read_mark = row_tracking.high_water_mark(snapshot.domain_metadata)
    if not row_tracking.is_supported(protocol):
        return _Tracked(tuple(actions), read_mark, None)
    if row_tracking.is_suspended(metadata, table):
        return _Tracked(row_tracking.strip(actions), read_mark, None)
    enabled = row_tracking.is_enabled(protocol, metadata)
    if (
        enabled
        and snapshot is not None
        and not row_tracking.is_enabled(snapshot.protocol, snapshot.metadata)
    ):
        _check_all_files_have_row_ids(txn, actions)
    preserved: bool | None = None
    if enabled and operation in row_tracking.REWRITING_OPERATIONS:
        said = (tags or {}).get(row_tracking.PRESERVED_TAG)
        if said is None and txn.row_tracking_preserved:
            said = "true"
        fresh = any(isinstance(a, AddFile) and a.base_row_id is None for a in actions)
        if fresh and said != "true":
            raise rt_errors.row_tracking_not_preserved(table, operation)
        preserved = said != "false"
    assigned = row_tracking.assign(actions, read_mark, txn.read_version + 1, table)
    return _Tracked(assigned, read_mark, preserved)


def _check_all_files_have_row_ids(txn: TransactionState, actions: list[Action]) -> None:
    """Enabling needs every file left live to have a ``baseRowId`` (the reference's
    invariant; the backfill gives them)."""
    assert txn.snapshot is not None
    files = txn.snapshot.all_files_arrow().select(["path", "baseRowId"])
    missing = files.filter(pc.is_null(files.column("baseRowId")))
    if not missing.num_rows:
        return
    removed = pa.array([a.path for a in actions if isinstance(a, RemoveFile)], pa.string())
    left = pc.sum(pc.invert(pc.is_in(missing.column("path"), value_set=removed))).as_py()
    if left:
        raise rt_errors.enable_needs_backfill(txn.table_root, int(left))


def _with_row_tracking_tag(
    tags: Mapping[str, str] | None, preserved: bool | None
) -> Mapping[str, str] | None:
    if preserved is None:
        return tags
    return {**(tags or {}), row_tracking.PRESERVED_TAG: str(preserved).lower()}


def _check_last_commit_not_empty(txn: TransactionState) -> None:
    """A zero-byte commit is what a writer without atomic put-if-absent leaves when it dies
    mid-write; readers take it as a version with no actions, but committing after it would
    bury whatever that writer meant to commit. Refuse, and say how to repair."""
    snapshot = txn.snapshot
    last = snapshot.segment.last_commit if snapshot is not None else None
    if last is not None and last.file.size == 0:
        raise _empty_commit(txn.table_root, last.path, last.version)


def _single(
    txn: TransactionState, actions: list[Action], kind: type, from_txn: Action | None
) -> Action | None:
    found = [a for a in actions if isinstance(a, kind)]
    if from_txn is not None:
        found.append(from_txn)
    if len(found) > 1:
        raise errors.InternalError(
            "DELTA_MULTIPLE_" + kind.__name__.upper() + "_ACTIONS",
            f"a commit may hold one {kind.__name__} action, this one has {len(found)}",
            table=txn.table_root,
        )
    return found[0] if found else None


def _upgrade_protocol(
    txn: TransactionState,
    metadata: Metadata,
    protocol: Protocol | None,
    current: Protocol | None,
) -> tuple[Metadata, Protocol | None]:
    """The protocol the new metadata needs (``delta.feature.*`` and version properties are
    folded into it and dropped from the configuration); never below the current one."""
    schema = parse_schema(metadata.schema_string) if metadata.schema_string else None
    if schema is not None:  # the reference's updateMetadata checks the list on every update
        validate_stats_columns(
            schema, metadata.partition_columns, metadata.configuration, txn.table_root
        )
    base = protocol if protocol is not None else current
    needed, configuration = protocol_for_table(metadata.configuration, schema, base)
    if configuration != metadata.configuration:
        metadata = replace(metadata, configuration=configuration)
    if needed != current:
        return metadata, needed
    return metadata, protocol


def _check_no_downgrade(table: str, current: Protocol, new: Protocol) -> None:
    lower = new.min_reader_version < current.min_reader_version or (
        new.min_writer_version < current.min_writer_version
    )
    dropped = (reader_features(current) - reader_features(new)) | (
        writer_features(current) - writer_features(new)
    )
    if lower or dropped:
        raise errors.DeltaWriteError(
            "DELTA_INVALID_PROTOCOL_DOWNGRADE",
            f"Protocol version cannot be downgraded from ({current.min_reader_version},"
            f"{current.min_writer_version}) to ({new.min_reader_version},"
            f"{new.min_writer_version})"
            + (f"; features {sorted(dropped)} would be dropped" if dropped else "")
            + ".",
            table=table,
            help="a protocol only goes up; drop features with DROP FEATURE.",
        )


def _check_partition_values(table: str, metadata: Metadata, actions: list[Action]) -> None:
    schema = parse_schema(metadata.schema_string) if metadata.schema_string else StructType(())
    mapping = TableProperties(metadata.configuration, table).column_mapping_mode != "none"
    expected = set()
    for name in metadata.partition_columns:
        try:
            field = schema.field(name)
            expected.add(field.physical_name if mapping else field.name)
        except KeyError:
            expected.add(name)
    for a in actions:
        if isinstance(a, AddFile) and set(a.partition_values) != expected:
            raise errors.DeltaWriteError(
                "DELTA_INVALID_PARTITIONING_SCHEMA",
                f"The AddFile {a.path} has partition values for {sorted(a.partition_values)} but "
                f"the table is partitioned by {sorted(expected)}.",
                table=table,
                help="write the file with the table's partition columns.",
            )


def _check_append_only(table: str, metadata: Metadata, actions: list[Action]) -> None:
    if not TableProperties(metadata.configuration, table).append_only:
        return
    if any(isinstance(a, RemoveFile) and a.data_change for a in actions):
        raise errors.DeltaWriteError(
            "DELTA_CANNOT_MODIFY_APPEND_ONLY",
            "This table is configured to only allow appends (delta.appendOnly=true).",
            table=table,
            help="to allow updates or deletes, use ALTER TABLE <table> SET TBLPROPERTIES "
            "(delta.appendOnly=false).",
        )


def _check_duplicates(table: str, actions: list[Action]) -> None:
    app_versions: dict[str, int] = {}
    for a in actions:
        if isinstance(a, SetTransaction) and (
            app_versions.setdefault(a.app_id, a.version) != a.version
        ):
            raise errors.invalid_argument(
                f"Two SetTransaction actions for application {a.app_id!r} with different "
                "versions in one commit.",
                table=table,
            )
    keys = Counter(
        (type(a).__name__, a.path, a.deletion_vector.unique_id if a.deletion_vector else None)
        for a in actions
        if isinstance(a, AddFile | RemoveFile)
    )
    dupes = sorted(k[1] for k, n in keys.items() if n > 1)
    if dupes:
        raise errors.DeltaWriteError(
            "DELTA_DUPLICATE_ACTIONS_FOUND",
            f"File operation for path {dupes[0]} was specified several times in one commit.",
            table=table,
        )
    domains = Counter(a.domain for a in actions if isinstance(a, DomainMetadata))
    twice = sorted(d for d, n in domains.items() if n > 1)
    if twice:
        raise errors.DeltaWriteError(
            "DELTA_DUPLICATE_DOMAIN_METADATA_INTERNAL_ERROR",
            f"Domain metadata for domain {twice[0]} appears several times in one commit.",
            table=table,
        )


def _isolation_level(txn: TransactionState, metadata: Metadata, actions: tuple[Action, ...]) -> str:
    """The table's level (or the caller's), downgraded to SnapshotIsolation when no file
    action changes data and nothing but files is committed (e.g. OPTIMIZE)."""
    level = txn.isolation_level or _table_isolation_level(txn, metadata)
    files = [a for a in actions if isinstance(a, AddFile | RemoveFile | AddCDCFile)]
    # Row tracking's high-water mark rides along with new files (an OPTIMIZE's, say).
    non_files = [
        a
        for a in actions
        if not isinstance(a, AddFile | RemoveFile | AddCDCFile)
        and not (isinstance(a, DomainMetadata) and a.domain == row_tracking.DOMAIN)
    ]
    if files and not non_files and all(not a.data_change for a in files):
        return SNAPSHOT_ISOLATION
    return level


def _table_isolation_level(txn: TransactionState, metadata: Metadata) -> str:
    value = metadata.configuration.get("delta.isolationLevel")
    return value if value in ("Serializable", "WriteSerializable") else SERIALIZABLE


# -- in-commit timestamps -----------------------------------------------------------------------


def _ict_enabled(txn: TransactionState, pending: PendingCommit) -> bool:
    metadata = pending.metadata or (txn.snapshot.metadata if txn.snapshot else None)
    protocol = pending.protocol or (txn.snapshot.protocol if txn.snapshot else None)
    if metadata is None or protocol is None:
        return False
    enabled = TableProperties(metadata.configuration).enable_in_commit_timestamps
    return enabled and is_feature_supported(protocol, "inCommitTimestamp")


def _in_commit_timestamp(
    txn: TransactionState, pending: PendingCommit, now: int, previous_attempt: int | None
) -> int | None:
    """max(now, previous commit's timestamp + 1), and never below an earlier attempt's."""
    if not _ict_enabled(txn, pending):
        return None
    floor = now
    if txn.snapshot is not None:
        floor = max(floor, txn.snapshot.timestamp + 1)
    if previous_attempt is not None:
        floor = max(floor, previous_attempt)
    return floor


def _with_ict_enablement(
    txn: TransactionState, pending: PendingCommit, version: int, ict: int | None
) -> list[Action]:
    """Enabling ICT on an existing table records from which version and time it holds."""
    actions = list(pending.actions)
    md = pending.metadata
    if (
        ict is None
        or md is None
        or txn.snapshot is None
        or txn.snapshot.in_commit_timestamps_enabled
    ):
        return actions
    conf = dict(md.configuration)
    conf[ICT_ENABLEMENT_VERSION] = str(version)
    conf[ICT_ENABLEMENT_TIMESTAMP] = str(ict)
    return [replace(md, configuration=conf) if a is md else a for a in actions]


# -- conflicts ----------------------------------------------------------------------------------


def _resolve_conflicts(
    txn: TransactionState, pending: PendingCommit, attempt: int, own_ict: int | None
) -> tuple[PendingCommit, int, int | None]:
    """Check every commit from ``attempt`` to the latest against ``pending``; return the
    (possibly rebased) pending commit, the next version to try and the ICT floor.

    Winners are read by name, version after version, until one is absent: no directory listing,
    so a listing that lags behind a write can never make a winner look absent."""
    store = txn.log.store
    version = attempt
    while True:
        path = f"{txn.log.log_root}/{commit_name(version)}"
        try:
            data = store.read(path)
            mtime = store.stat(path).modification_time
        except FileNotFoundError:
            break
        if not data.strip():
            raise _empty_commit(txn.table_root, path, version)
        winner = WinningCommit.parse(version, data, mtime, txn.table_root)
        pending = check_conflicts(pending, winner)
        if own_ict is not None:
            own_ict = in_commit_timestamp_after(own_ict, winner)
        version += 1
    if version == attempt:
        raise errors.ConcurrentWriteException(
            "DELTA_CONCURRENT_WRITE",
            f"Version {attempt} existed when this commit was attempted but cannot be read now "
            "(deleted concurrently?).",
            table=txn.table_root,
            version=attempt,
            help="retry the operation.",
        )
    log.info(
        "Version %d of %s was taken; no logical conflict with versions %d..%d, retrying at %d",
        attempt,
        txn.table_root,
        attempt,
        version - 1,
        version,
    )
    return pending, version, own_ict


def _empty_commit(table: str, path: str, version: int) -> errors.InvalidTableError:
    return errors.InvalidTableError(
        "DELTA_EMPTY_COMMIT_FILE",
        f"Commit file {path} (version {version}) is empty: a writer crashed or its storage lost "
        "the content. Committing after it would hide that.",
        table=table,
        help="check the writer that made it; if that version was never committed, delete the "
        "empty file and retry.",
    )
