"""Row tracking (PROTOCOL.md "Row Tracking"; reference ``RowId``, ``DefaultRowCommitVersion``,
``MaterializedRowTrackingColumn``, ``ConflictChecker.reassignOverlappingRowIds``).

When a table's protocol supports ``rowTracking``, every ``add`` a commit writes for a new file
gets ``baseRowId`` (fresh ids just above the ``delta.rowTracking`` domain's high-water mark, one
per physical record) and ``defaultRowCommitVersion`` (the commit's version), and the commit
carries the domain with the new high-water mark. A row's id is then
``coalesce(materialized row id, baseRowId + physical row index)`` and its commit version
``coalesce(materialized version, defaultRowCommitVersion)``; commands that rewrite rows keep
them by writing the materialized columns (hidden parquet columns the table names) when row
tracking is *enabled* (``delta.enableRowTracking``).

Everything here is pure: actions in, actions out. The committer calls :func:`assign` once per
commit and :func:`rebase` once per winning commit on a retry.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog.actions import Action, AddFile, DomainMetadata, Metadata, Protocol
from deltalog.errors import row_tracking as rt_errors
from deltalog.features import is_feature_supported

FEATURE = "rowTracking"
DOMAIN = "delta.rowTracking"
ENABLED = "delta.enableRowTracking"
SUSPENDED = "delta.rowTrackingSuspended"
ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"
ROW_ID_PREFIX = "_row-id-col-"
ROW_COMMIT_VERSION_PREFIX = "_row-commit-version-col-"
# commitInfo tags: the commit kept row ids (DELETE, UPDATE, MERGE, OPTIMIZE set it), and the
# commit only enabled row tracking (a concurrent transaction may adopt it).
PRESERVED_TAG = "delta.rowTracking.preserved"
ENABLEMENT_ONLY_TAG = "rowTrackingEnablementOnly"
MISSING_HIGH_WATER_MARK = -1
BACKFILL_OPERATION = "ROW TRACKING BACKFILL"
UNBACKFILL_OPERATION = "ROW TRACKING UNBACKFILL"  # before DROP FEATURE rowTracking

# Operations that rewrite existing rows into new files: on a table with row tracking enabled
# they must carry the rows' ids over (and say so with PRESERVED_TAG), else they are refused.
REWRITING_OPERATIONS = frozenset(
    {"DELETE", "UPDATE", "MERGE", "OPTIMIZE", "REORG", "REMOVE COLUMN MAPPING"}
)


# -- the table's state ---------------------------------------------------------------------------


def is_supported(protocol: Protocol) -> bool:
    """Whether new files must get row ids (the protocol supports ``rowTracking``)."""
    return is_feature_supported(protocol, FEATURE)


def is_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether row ids are kept across rewrites: supported and ``delta.enableRowTracking``."""
    return is_supported(protocol) and _true(metadata.configuration.get(ENABLED))


def is_suspended(metadata: Metadata, table: str) -> bool:
    """``delta.rowTrackingSuspended``: no ids are assigned (used while dropping the feature).

    Raises:
        DeltaWriteError: the table is both enabled and suspended.
    """
    suspended = _true(metadata.configuration.get(SUSPENDED))
    if suspended and _true(metadata.configuration.get(ENABLED)):
        raise rt_errors.illegal_property_combination(table)
    return suspended


def assigns_ids(protocol: Protocol, metadata: Metadata, table: str) -> bool:
    """Whether a commit leaving ``protocol`` and ``metadata`` assigns row ids."""
    return is_supported(protocol) and not is_suspended(metadata, table)


def high_water_mark(domains: Iterable[DomainMetadata]) -> int:
    """The ``rowIdHighWaterMark`` of the ``delta.rowTracking`` domain among ``domains``
    (:data:`MISSING_HIGH_WATER_MARK` when absent or removed)."""
    for d in domains:
        if d.domain == DOMAIN and not d.removed:
            return int(json.loads(d.configuration)["rowIdHighWaterMark"])
    return MISSING_HIGH_WATER_MARK


def domain_action(mark: int) -> DomainMetadata:
    """The domain metadata recording high-water mark ``mark`` (as the reference writes it)."""
    configuration = {"rowIdHighWaterMark": mark, "domainName": DOMAIN}
    return DomainMetadata(DOMAIN, json.dumps(configuration, separators=(",", ":")))


def num_records(add: AddFile) -> int | None:
    """The physical records of ``add`` (``numRecords`` of its stats, deleted rows included)."""
    if not add.stats:
        return None
    n = json.loads(add.stats).get("numRecords")
    return None if n is None else int(n)


# -- assignment at commit ------------------------------------------------------------------------


def assign(
    actions: Sequence[Action], read_mark: int, version: int, table: str
) -> tuple[Action, ...]:
    """``actions`` with fresh row ids for every ``add`` without ``baseRowId`` (above
    ``read_mark``, in action order), ``defaultRowCommitVersion = version`` where missing, and
    the new high-water mark's domain appended when ids were assigned.

    Raises:
        InternalError: ``actions`` already carry the ``delta.rowTracking`` domain.
        DeltaWriteError: an ``add`` that needs ids has no ``numRecords``.
    """
    mark = read_mark
    out: list[Action] = []
    for a in actions:
        if isinstance(a, DomainMetadata) and a.domain == DOMAIN:
            raise rt_errors.high_water_mark_set_by_caller(table)
        if isinstance(a, AddFile):
            if a.base_row_id is None:
                a = dataclasses.replace(a, base_row_id=mark + 1)
                mark += _records_or_raise(a, table)
            if a.default_row_commit_version is None:
                a = dataclasses.replace(a, default_row_commit_version=version)
        out.append(a)
    if mark != read_mark:
        out.append(domain_action(mark))
    return tuple(out)


def strip(actions: Sequence[Action]) -> tuple[Action, ...]:
    """``actions`` without row ids or commit versions on new ``add``\\ s (row tracking
    suspended: the reference propagates none)."""
    return tuple(
        dataclasses.replace(a, base_row_id=None, default_row_commit_version=None)
        if isinstance(a, AddFile)
        else a
        for a in actions
    )


def rebase(
    actions: Sequence[Action],
    read_mark: int,
    winner_mark: int | None,
    winner_version: int,
    table: str,
    kept: frozenset[str] = frozenset(),
) -> tuple[tuple[Action, ...], int]:
    """``actions`` rebased on a winning commit (reference ``reassignOverlappingRowIds`` and
    ``reassignRowCommitVersions``): ids this transaction assigned (``baseRowId`` above
    ``read_mark``, or none) move above the winner's high-water mark (``winner_mark``; ``None``
    when it wrote none, i.e. it kept ``read_mark``), the domain follows, and a
    ``defaultRowCommitVersion`` of the winner's version (or none) becomes the next version.
    Ids at or below ``read_mark`` were copied from existing files and stay, as do those of
    the files in ``kept`` (ids a winning backfill gave them, copied onto this transaction's
    re-adds; the reference reassigns those, which changes the ids of their rows).

    Returns:
        The rebased actions and the high-water mark they read from now on.

    Raises:
        DeltaWriteError: an ``add`` that needs ids has no ``numRecords``.
    """
    base = read_mark if winner_mark is None else winner_mark
    mark = base
    out: list[Action] = []
    had_domain = False
    for a in actions:
        if isinstance(a, DomainMetadata) and a.domain == DOMAIN:
            had_domain = True
            continue
        if isinstance(a, AddFile):
            ours = a.base_row_id is None or a.base_row_id > read_mark
            if ours and a.path not in kept:
                a = dataclasses.replace(a, base_row_id=mark + 1)
                mark += _records_or_raise(a, table)
            fresh_version = a.default_row_commit_version in (None, winner_version)
            if fresh_version and a.path not in kept:
                a = dataclasses.replace(a, default_row_commit_version=winner_version + 1)
        out.append(a)
    if mark != base or had_domain:
        out.append(domain_action(mark))
    return tuple(out), base


def _records_or_raise(add: AddFile, table: str) -> int:
    n = num_records(add)
    if n is None:
        raise rt_errors.row_id_assignment_without_stats(table, add.path)
    return n


# -- materialized columns ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MaterializedColumns:
    """The parquet columns where rewritten files keep their rows' ids and commit versions."""

    row_id: str
    row_commit_version: str

    @property
    def names(self) -> tuple[str, str]:
        return (self.row_id, self.row_commit_version)


def materialized_columns(protocol: Protocol, metadata: Metadata) -> MaterializedColumns | None:
    """The materialized columns of a table with row tracking enabled (``None`` otherwise, or
    when the table names none: a table enabled by a writer that does not preserve ids)."""
    if not is_enabled(protocol, metadata):
        return None
    conf = metadata.configuration
    row_id, version = conf.get(ROW_ID_COLUMN), conf.get(ROW_COMMIT_VERSION_COLUMN)
    if not row_id or not version:
        return None
    return MaterializedColumns(row_id, version)


def with_column_names(protocol: Protocol, old: Metadata | None, new: Metadata) -> Metadata:
    """``new`` with the table's materialized column names (reference
    ``updateMaterializedColumnName``): kept from ``old`` when it has them, else random names
    with the reference's prefixes; removed when the protocol does not support row tracking."""
    conf = dict(new.configuration)
    keys = ((ROW_ID_COLUMN, ROW_ID_PREFIX), (ROW_COMMIT_VERSION_COLUMN, ROW_COMMIT_VERSION_PREFIX))
    for key, prefix in keys:
        if not is_supported(protocol):
            conf.pop(key, None)
            continue
        before = old.configuration.get(key) if old is not None else None
        conf[key] = before or f"{prefix}{uuid.uuid4()}"
    if conf == new.configuration:
        return new
    return dataclasses.replace(new, configuration=conf)


def row_tracking_values(
    indexes: np.ndarray,
    base_row_id: int | None,
    default_version: int | None,
    materialized_ids: pa.Array | pa.ChunkedArray | None,
    materialized_versions: pa.Array | pa.ChunkedArray | None,
) -> tuple[pa.Array, pa.Array]:
    """The row ids and row commit versions of a file's rows at physical ``indexes``:
    the materialized value where non-null, else ``baseRowId + index`` and
    ``defaultRowCommitVersion`` (null when the file has none)."""
    n = len(indexes)
    if base_row_id is None:
        fresh_ids = pa.nulls(n, pa.int64())
    else:
        fresh_ids = pa.array(indexes.astype(np.int64) + np.int64(base_row_id), pa.int64())
    fresh_versions = pa.array(np.full(n, default_version or 0, np.int64), pa.int64())
    if default_version is None:
        fresh_versions = pa.nulls(n, pa.int64())
    ids = fresh_ids if materialized_ids is None else pc.coalesce(materialized_ids, fresh_ids)
    versions = (
        fresh_versions
        if materialized_versions is None
        else pc.coalesce(materialized_versions, fresh_versions)
    )
    return _array(ids), _array(versions)


def read_values(
    names: MaterializedColumns,
    file: Mapping[str, Any],
    data: pa.Table,
    indexes: np.ndarray | None = None,
) -> pa.Table:
    """The row ids and commit versions of the rows of one data file, as a table with the
    materialized columns' names: ``file`` is its row of ``all_files_arrow()`` (``baseRowId``,
    ``defaultRowCommitVersion``), ``data`` its physical rows as read (before deleted rows are
    dropped), ``indexes`` their physical row indexes (``0..n-1`` when ``None``)."""
    if indexes is None:
        indexes = np.arange(data.num_rows, dtype=np.int64)
    found = [data.column(n) if n in data.column_names else None for n in names.names]
    base, version = file.get("baseRowId"), file.get("defaultRowCommitVersion")
    ids, versions = row_tracking_values(
        indexes,
        None if base is None else int(base),
        None if version is None else int(version),
        *found,
    )
    return pa.table({names.row_id: ids, names.row_commit_version: versions})


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks().cast(pa.int64())
    return values.cast(pa.int64())


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def enabling_properties(configuration: Mapping[str, str]) -> bool:
    """Whether ``configuration`` turns row tracking on."""
    return _true(configuration.get(ENABLED))
