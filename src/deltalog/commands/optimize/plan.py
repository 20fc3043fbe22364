"""OPTIMIZE without an engine: which files to rewrite, how to commit them, what to report
(reference ``OptimizeTableCommand``, ``OptimizeTableStrategy``; writes.md §4.5).

The engines (Spark in :mod:`deltalog.spark.commands.optimize`, pyarrow in
:mod:`deltalog.commands.optimize.arrow`) turn each :class:`Bin` into new files; everything
else is decided here:

* ``where`` filters may name partition columns only (``DELTA_NON_PARTITION_COLUMN_REFERENCE``);
* compaction candidates are the files smaller than ``optimize.minFileSize`` or whose deletion
  vector deletes more than ``optimize.maxDeletedRowsRatio`` of their rows (or that have a vector
  but no ``numRecords``); Z-order takes every file;
* per partition, files sorted by size are packed greedily into bins of at most
  ``optimize.maxFileSize`` bytes (Z-order: one bin per partition); a bin of one file is dropped
  unless Z-ordering or the file carries a deletion vector to purge;
* committing and the metrics are :mod:`deltalog.commands.optimize.commit`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.commands.ddl.create_table import CLUSTERING_DOMAIN
from deltalog.errors import optimize as optimize_errors
from deltalog.scan.predicate import (
    And,
    Predicate,
    columns,
    has_opaque,
    parse_predicate,
    simple_string,
)
from deltalog.scan.row_filter import PartitionMatcher, partition_matches, typed_partitions
from deltalog.schema import is_geo
from deltalog.schema import simple_string as type_string
from deltalog.txn import operations
from deltalog.write.stats import stats_columns

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.txn.transaction import Transaction

CONF_PREFIX = "spark.databricks.delta.optimize."
MIN_FILE_SIZE_CONF = CONF_PREFIX + "minFileSize"
MAX_FILE_SIZE_CONF = CONF_PREFIX + "maxFileSize"
MAX_DELETED_ROWS_RATIO_CONF = CONF_PREFIX + "maxDeletedRowsRatio"
ZORDER_STATS_CHECK_CONF = optimize_errors.ZORDER_STATS_CHECK_CONF
GIB = 1024 * 1024 * 1024


# -- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OptimizeSettings:
    """The reference's OPTIMIZE confs (defaults: 1 GiB, 1 GiB, 0.05, check on).

    Attributes:
        min_file_size: files smaller than this are compaction candidates.
        max_file_size: the largest bin (compaction: one output file per bin); Z-order writes
            about ``partition size / max_file_size`` files per partition.
        max_deleted_rows_ratio: files whose deletion vector deletes more than this share of
            their rows are candidates too.
        check_z_order_stats: refuse Z-ordering on columns without statistics.
    """

    min_file_size: int = GIB
    max_file_size: int = GIB
    max_deleted_rows_ratio: float = 0.05
    check_z_order_stats: bool = True

    def __post_init__(self) -> None:
        if self.min_file_size < 0:
            raise errors.invalid_argument("minFileSize has to be positive")
        if self.max_file_size <= 0:
            raise errors.invalid_argument("maxFileSize has to be positive")
        if not 0 <= self.max_deleted_rows_ratio <= 1:
            raise errors.invalid_argument("maxDeletedRowsRatio must be in range [0.0, 1.0]")

    @classmethod
    def from_conf(cls, get: Callable[[str], str | None]) -> OptimizeSettings:
        """Settings from session confs (``get`` returns a conf's value or ``None``)."""
        check = (get(ZORDER_STATS_CHECK_CONF) or "true").strip().lower() != "false"
        try:
            return cls(
                min_file_size=int(get(MIN_FILE_SIZE_CONF) or GIB),
                max_file_size=int(get(MAX_FILE_SIZE_CONF) or GIB),
                max_deleted_rows_ratio=float(get(MAX_DELETED_ROWS_RATIO_CONF) or 0.05),
                check_z_order_stats=check,
            )
        except ValueError as e:
            raise errors.invalid_argument(f"invalid OPTIMIZE conf value: {e}") from None


# -- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bin:
    """Files of one partition rewritten together: compaction writes them as one file, Z-order
    as about ``size / max_file_size`` files.

    Attributes:
        partition_values: the partition's values as the log writes them.
        files: the files, rows of ``all_files_arrow()``, smallest first.
    """

    partition_values: Mapping[str, str | None]
    files: pa.Table

    @property
    def size(self) -> int:
        return sum(self.files.column("size").to_pylist())

    @property
    def num_files(self) -> int:
        return self.files.num_rows


@dataclass(frozen=True, slots=True)
class OptimizePlan:
    """What one OPTIMIZE rewrites, decided on one snapshot.

    Attributes:
        snapshot: the snapshot the files were chosen from.
        bins: the bins to rewrite, partition by partition.
        predicates: the ``where`` filters as Spark prints them (``predicate.simple_string``),
            for ``commitInfo.operationParameters.predicate``.
        partition_predicate: the filters parsed and joined with AND (``None``: every partition).
        z_order_by: the Z-order columns, empty for compaction.
        settings: the confs it was planned with.
        considered: files matching the partition filter (``totalConsideredFiles``).
        cluster_by: the clustering columns of a clustered (liquid) table, which the rows are
            then ordered by (``z_order_by`` holds them too); empty otherwise.
    """

    snapshot: Snapshot
    bins: tuple[Bin, ...]
    predicates: tuple[str, ...]
    partition_predicate: Predicate | None
    z_order_by: tuple[str, ...]
    settings: OptimizeSettings
    considered: int
    cluster_by: tuple[str, ...] = ()

    @property
    def files(self) -> pa.Table:
        """Every file of every bin (the files the commit removes)."""
        if not self.bins:
            return self.snapshot.all_files_arrow().slice(0, 0)
        return pa.concat_tables([b.files for b in self.bins])

    @property
    def operation(self) -> operations.Operation:
        return operations.optimize(self.predicates, self.z_order_by, cluster_by=self.cluster_by)

    def track_reads(self, txn: Transaction) -> None:
        """Record in ``txn`` what OPTIMIZE read: the compacted files and the partition filter
        (reference ``trackFilesRead`` + ``trackReadPredicates``). A concurrent remove of one of
        those files then conflicts; a concurrent append does not (SnapshotIsolation)."""
        txn.read_set.add_files(self.files.column("path"))
        if self.partition_predicate is not None:
            txn.read_set.predicates.append(self.partition_predicate)


def plan_optimize(
    snapshot: Snapshot,
    where: str | Sequence[str] | None = None,
    z_order_by: Sequence[str] = (),
    settings: OptimizeSettings | None = None,
    matcher: PartitionMatcher | None = None,
) -> OptimizePlan:
    """Choose the bins of an OPTIMIZE of ``snapshot``. ``matcher``: the engine's evaluation of
    the ``where`` filters over partition values (Spark's, from the Spark layer); without it
    deltalog's evaluator decides, or refuses what it cannot decide exactly.

    Raises:
        InvalidArgumentError: a filter names a non-partition column or cannot be parsed; a
            Z-order column is a partition column, missing, or has no statistics.
    """
    settings = settings or OptimizeSettings()
    texts = _filter_texts(where)
    cluster_by = clustering_columns(snapshot)
    if cluster_by and texts:
        raise optimize_errors.clustering_with_partition_predicate(texts, snapshot.table_root)
    if cluster_by and z_order_by:
        raise optimize_errors.clustering_with_z_order_by(z_order_by, snapshot.table_root)
    # With the engine's matcher the engine has checked the filters (the Spark layer: Spark's
    # parser and analyzer) and decides which partitions match; deltalog's parse is then only
    # the read set's predicate, and a filter it cannot parse is left out of it.
    predicate = partition_predicate(snapshot, texts, engine_checked=matcher is not None)
    z_cols = validate_z_order_columns(
        snapshot, cluster_by or z_order_by, settings.check_z_order_stats
    )
    files = snapshot.all_files_arrow()
    if texts and files.num_rows:
        files = files.filter(partition_matches(snapshot, files, predicate, matcher))
    candidates = files if z_cols else files.filter(_candidate_mask(files, settings))
    max_bin = (2**63 - 1) if z_cols else settings.max_file_size
    bins: list[Bin] = []
    for values, group in _by_partition(snapshot, candidates):
        for packed in _pack(group, max_bin):
            if packed.num_rows > 1 or z_cols or _has_vector(packed):
                bins.append(Bin(values, packed))
    return OptimizePlan(
        snapshot,
        tuple(bins),
        tuple(_printed(text) for text in texts),
        predicate,
        z_cols,
        settings,
        files.num_rows,
        z_cols if cluster_by else (),
    )


def plan_purge(snapshot: Snapshot, settings: OptimizeSettings | None = None) -> OptimizePlan:
    """The bins of ``REORG TABLE ... APPLY (PURGE)``: every file with a deletion vector,
    packed per partition as compaction packs them, so that the rewrite leaves no vector (the
    reference's purge strategy; DROP FEATURE deletionVectors runs it)."""
    files = snapshot.all_files_arrow()
    return plan_rewrite(
        snapshot, files.filter(pc.is_valid(files.column("deletionVector"))), settings
    )


def plan_rewrite(
    snapshot: Snapshot, files: pa.Table, settings: OptimizeSettings | None = None
) -> OptimizePlan:
    """Bins that rewrite exactly ``files`` (live ``add`` rows of ``snapshot``), packed per
    partition as compaction packs them (purges, type-widening rewrites)."""
    settings = settings or OptimizeSettings()
    bins = [
        Bin(values, packed)
        for values, group in _by_partition(snapshot, files)
        for packed in _pack(group, settings.max_file_size)
    ]
    total = snapshot.all_files_arrow().num_rows
    return OptimizePlan(snapshot, tuple(bins), (), None, (), settings, total)


def clustering_columns(snapshot: Snapshot) -> tuple[str, ...]:
    """The clustering columns of a clustered (liquid) table, from its ``delta.clustering``
    domain, in the schema's spelling (physical names mapped back under column mapping); empty
    for other tables. Nested columns are named with dots."""
    config = next(
        (d.configuration for d in snapshot.domain_metadata if d.domain == CLUSTERING_DOMAIN),
        None,
    )
    if not config:
        return ()
    columns = json.loads(config).get("clusteringColumns") or []
    by_name = {f.name.lower(): f.name for f in snapshot.schema.fields}
    for f in snapshot.schema.fields:
        by_name.setdefault(f.physical_name.lower(), f.name)
    out = []
    for parts in columns:
        name = ".".join(parts) if isinstance(parts, list) else str(parts)
        out.append(by_name.get(name.lower(), name))
    return tuple(out)


def _filter_texts(where: str | Sequence[str] | None) -> list[str]:
    if where is None:
        return []
    return [where] if isinstance(where, str) else list(where)


def partition_predicate(
    snapshot: Snapshot, texts: Sequence[str], *, engine_checked: bool = False
) -> Predicate | None:
    """The ``where`` filters parsed, checked to name only partition columns, joined by AND.

    ``engine_checked``: an engine (Spark) has checked the filters and evaluates them; a filter
    deltalog cannot parse, or can parse but not evaluate, is then left out, so the result
    selects at least the partitions the filters select (a read-set predicate stays sound when
    it is wider than what was read) and ``None`` means every partition.

    Raises:
        InvalidArgumentError: a filter cannot be parsed (unless ``engine_checked``), or names
            a non-partition column.
    """
    root = snapshot.table_root
    parts = list(snapshot.partition_columns)
    lowered = {c.lower() for c in parts}
    parsed: Predicate | None = None
    for text in texts:
        try:
            p = parse_predicate(text)
        except ValueError as e:
            if engine_checked:
                continue
            raise optimize_errors.unsupported_predicate(text, str(e), root) from None
        if has_opaque(p):
            if engine_checked:
                continue
            raise optimize_errors.unsupported_predicate(
                text, "only comparisons of partition columns with literals are supported", root
            )
        for name in sorted(columns(p)):
            if name.strip("`").lower() not in lowered:
                raise optimize_errors.non_partition_column_reference(name, parts, root)
        parsed = p if parsed is None else And(parsed, p)
    return parsed


def _printed(text: str) -> str:
    """A filter as Spark prints it for ``commitInfo`` when deltalog parses it, else as given."""
    try:
        return simple_string(parse_predicate(text))
    except ValueError:
        return text


def validate_z_order_columns(
    snapshot: Snapshot, names: Sequence[str], check_stats: bool = True
) -> tuple[str, ...]:
    """The Z-order columns in the table's spelling (reference ``validateZorderByColumns``).

    Raises:
        InvalidArgumentError: a partition column (DELTA_ZORDERING_ON_PARTITION_COLUMN), a column
            not in the data schema, a geometry or geography column, nested too
            (DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES), or columns without statistics
            (checked last, all named).
    """
    root = snapshot.table_root
    parts = {c.lower() for c in snapshot.partition_columns}
    data = {f.name.lower(): f.name for f in snapshot.schema.fields if f.name.lower() not in parts}
    with_stats = {
        ".".join(c.path).lower()
        for c in stats_columns(
            snapshot.schema,
            snapshot.partition_columns,
            snapshot.metadata.configuration,
            snapshot.column_mapping_mode,
        )
    }
    out, missing_stats = [], []
    for raw in names:
        name = raw.strip("`")
        if name.lower() in parts:
            raise optimize_errors.z_ordering_on_partition_column(raw, root)
        if name.lower() not in data:
            raise optimize_errors.z_ordering_column_does_not_exist(raw, root)
        column_type = snapshot.schema.field(data[name.lower()]).type
        if is_geo(column_type):
            raise optimize_errors.operation_not_supported_for_data_types(
                "Z-ORDER", raw, type_string(column_type), root
            )
        if name.lower() not in with_stats:
            missing_stats.append(raw)
        out.append(data[name.lower()])
    if check_stats and missing_stats:
        raise optimize_errors.z_ordering_on_column_without_stats(missing_stats, root)
    return tuple(out)


def _candidate_mask(files: pa.Table, settings: OptimizeSettings) -> pa.Array:
    """Small files, and files with too many rows deleted by their deletion vector."""
    sizes = files.column("size").to_pylist()
    vectors = files.column("deletionVector").to_pylist()
    stats = files.column("stats").to_pylist()
    mask = []
    for size, dv, text in zip(sizes, vectors, stats, strict=True):
        mask.append(size < settings.min_file_size or _too_many_deleted(dv, text, settings))
    return pa.array(mask, pa.bool_())


def _too_many_deleted(dv: Any, stats: str | None, settings: OptimizeSettings) -> bool:
    if not dv:
        return False
    records = json.loads(stats).get("numRecords") if stats else None
    if not records:  # a vector without a row count: compact, the new file gets stats
        return True
    return bool(int(dv["cardinality"]) / int(records) > settings.max_deleted_rows_ratio)


def _by_partition(
    snapshot: Snapshot, files: pa.Table
) -> list[tuple[dict[str, str | None], pa.Table]]:
    """``files`` grouped by their typed partition values (``2024-01-01 00:00:00`` and
    ``2024-01-01T00:00:00.000000Z`` are one partition), in a stable order."""
    if not files.num_rows:
        return []
    raw = [dict(pv or []) for pv in files.column("partitionValues").to_pylist()]
    keyed = [c.to_pylist() for c in typed_partitions(snapshot, files).columns]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in range(files.num_rows):
        key = tuple((v[i] is None, str(v[i])) for v in keyed)
        groups.setdefault(key, []).append(i)
    return [(raw[idx[0]], files.take(idx)) for _, idx in sorted(groups.items())]


def _pack(files: pa.Table, max_bin: int) -> list[pa.Table]:
    """Greedy bins of at most ``max_bin`` bytes over ``files`` sorted by size (a file larger
    than ``max_bin`` gets a bin of its own)."""
    sizes = files.column("size").to_pylist()
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])  # stable, as Scala's sortBy
    bins: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        if current and total + sizes[i] > max_bin:
            bins.append(current)
            current, total = [], 0
        current.append(i)
        total += sizes[i]
    if current:
        bins.append(current)
    return [files.take(b) for b in bins]


def _has_vector(files: pa.Table) -> bool:
    return any(dv is not None for dv in files.column("deletionVector").to_pylist())
