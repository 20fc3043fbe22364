"""Row tracking's pure rules (PROTOCOL.md "Row Tracking"; reference ``RowId.assignFreshRowIds``,
``DefaultRowCommitVersion.assignIfMissing``, ``ConflictChecker.reassignOverlappingRowIds`` and
``reassignRowCommitVersions``, ``MaterializedRowTrackingColumn``): actions in, actions out.
Expected ids are counted from the inputs' ``numRecords``."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from deltalog import row_tracking as rt
from deltalog.actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile
from deltalog.errors import DeltaWriteError, InternalError

SUPPORTED = Protocol(1, 7, None, ("domainMetadata", "rowTracking"))
UNSUPPORTED = Protocol(1, 2)


def _add(path: str, n: int | None, base: int | None = None, version: int | None = None) -> AddFile:
    stats = None if n is None else json.dumps({"numRecords": n})
    return AddFile(path, {}, 10, 1, True, stats, None, None, base, version)


def _marks(actions: tuple[object, ...]) -> list[int]:
    return [
        json.loads(a.configuration)["rowIdHighWaterMark"]
        for a in actions
        if isinstance(a, DomainMetadata) and a.domain == rt.DOMAIN
    ]


def test_fresh_ids_follow_the_high_water_mark_one_per_physical_record() -> None:
    actions = [_add("a", 3), RemoveFile("old"), _add("b", 0), _add("c", 5)]
    out = rt.assign(actions, 9, 4, "/t")
    adds = [a for a in out if isinstance(a, AddFile)]
    # ids 10-12 for a, none for b (an empty file takes the next base but no id), 13-17 for c
    assert [a.base_row_id for a in adds] == [10, 13, 13]
    assert [a.default_row_commit_version for a in adds] == [4, 4, 4]
    assert _marks(out) == [17]
    assert isinstance(out[1], RemoveFile)


def test_first_ids_of_a_table_start_at_zero() -> None:
    out = rt.assign([_add("a", 2)], rt.MISSING_HIGH_WATER_MARK, 0, "/t")
    assert out[0].base_row_id == 0  # type: ignore[union-attr]
    assert _marks(out) == [1]


def test_copied_ids_and_versions_are_kept_and_no_domain_without_fresh_ids() -> None:
    # A deletion-vector re-add keeps its file's ids and commit version.
    readd = _add("a", 3, base=5, version=2)
    out = rt.assign([readd], 20, 7, "/t")
    assert out == (readd,)


def test_a_new_file_without_num_records_is_refused() -> None:
    with pytest.raises(DeltaWriteError) as e:
        rt.assign([_add("a", None)], 0, 1, "/t")
    assert e.value.error_class == "DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS"


def test_the_caller_may_not_write_the_high_water_mark() -> None:
    with pytest.raises(InternalError):
        rt.assign([rt.domain_action(3)], 0, 1, "/t")


def test_high_water_mark_of_domains() -> None:
    assert rt.high_water_mark([]) == rt.MISSING_HIGH_WATER_MARK
    other = DomainMetadata("delta.clustering", "{}")
    assert rt.high_water_mark([other, rt.domain_action(41)]) == 41
    # what delta-spark writes (the domain name inside too)
    spark = DomainMetadata(rt.DOMAIN, '{"rowIdHighWaterMark":9,"domainName":"delta.rowTracking"}')
    assert rt.high_water_mark([spark]) == 9
    assert rt.high_water_mark([DomainMetadata(rt.DOMAIN, "{}", removed=True)]) == -1


def test_rebase_moves_own_ids_above_the_winner_and_bumps_versions() -> None:
    read_mark, winner_version = 9, 5
    mine = rt.assign([_add("a", 3), _add("b", 2)], read_mark, winner_version, "/t")
    # the winner appended 10 rows: its mark is 19
    out, mark = rt.rebase(mine, read_mark, 19, winner_version, "/t")
    adds = [a for a in out if isinstance(a, AddFile)]
    assert [a.base_row_id for a in adds] == [20, 23]
    assert [a.default_row_commit_version for a in adds] == [6, 6]
    assert _marks(out) == [24]
    assert mark == 19
    # a second winner that wrote no ids (mark kept) changes ids only if they overlap: not here
    again, mark2 = rt.rebase(out, mark, None, 6, "/t")
    assert [a.base_row_id for a in again if isinstance(a, AddFile)] == [20, 23]
    assert [a.default_row_commit_version for a in again if isinstance(a, AddFile)] == [7, 7]
    assert _marks(again) == [24] and mark2 == 19


def test_rebase_keeps_copied_ids_and_older_versions() -> None:
    copied = _add("dv", 4, base=3, version=1)  # ids of an existing file: at or below the mark
    fresh = _add("new", 2, base=10, version=5)
    out, _ = rt.rebase([copied, fresh, rt.domain_action(11)], 9, 30, 5, "/t")
    assert out[0] == copied
    assert out[1].base_row_id == 31 and out[1].default_row_commit_version == 6  # type: ignore[union-attr]
    assert _marks(out) == [32]


def test_rebase_assigns_ids_when_the_winner_turned_row_tracking_on() -> None:
    out, _ = rt.rebase([_add("a", 2)], -1, 7, 3, "/t")
    assert out[0].base_row_id == 8 and out[0].default_row_commit_version == 4  # type: ignore[union-attr]
    assert _marks(out) == [9]


def test_materialized_names_are_random_kept_and_dropped() -> None:
    new = Metadata("id", configuration={rt.ENABLED: "true", rt.ROW_ID_COLUMN: "other-table"})
    named = rt.with_column_names(SUPPORTED, None, new)
    row_id = named.configuration[rt.ROW_ID_COLUMN]
    version = named.configuration[rt.ROW_COMMIT_VERSION_COLUMN]
    assert row_id.startswith(rt.ROW_ID_PREFIX) and row_id != "other-table"
    assert version.startswith(rt.ROW_COMMIT_VERSION_PREFIX)
    assert rt.materialized_columns(SUPPORTED, named) == rt.MaterializedColumns(row_id, version)
    # the table's names stay across metadata updates
    later = rt.with_column_names(SUPPORTED, named, Metadata("id", configuration={}))
    assert later.configuration[rt.ROW_ID_COLUMN] == row_id
    assert rt.materialized_columns(SUPPORTED, later) is None  # not enabled
    # unsupported: no names
    assert rt.ROW_ID_COLUMN not in rt.with_column_names(UNSUPPORTED, named, named).configuration


def test_suspended_and_enabled_together_is_refused() -> None:
    both = Metadata("id", configuration={rt.ENABLED: "true", rt.SUSPENDED: "true"})
    with pytest.raises(DeltaWriteError):
        rt.is_suspended(both, "/t")
    assert rt.is_suspended(Metadata("id", configuration={rt.SUSPENDED: "true"}), "/t")


def test_row_values_prefer_materialized_ones() -> None:
    index = np.array([0, 2, 5], np.uint64)
    ids, versions = rt.row_tracking_values(
        index, 100, 7, pa.array([None, 42, None], pa.int64()), pa.array([3, None, None])
    )
    assert ids.to_pylist() == [100, 42, 105]
    assert versions.to_pylist() == [3, 7, 7]
    ids, versions = rt.row_tracking_values(index, None, None, None, None)
    assert ids.null_count == 3 and versions.null_count == 3
