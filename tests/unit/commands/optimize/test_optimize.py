"""OPTIMIZE without Spark: the reference's bin planning and its plain-Python run
(``deltalog.optimize``), checked on real tables.

Rows after a run are the rows written (or what ``deltalake`` read before it), read back by
``deltalake`` and DuckDB; never by deltalog.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.commands.optimize.arrow import write_bins
from deltalog.commands.optimize.commit import commit, commit_metrics, remove_actions
from deltalog.commands.optimize.plan import OptimizeSettings, plan_optimize
from deltalog.commands.optimize.zorder import z_order_keys
from deltalog.scan.predicate import parse_predicate, simple_string
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])


def _batch(start: int, n: int, part: str) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "p": [part] * n, "v": [i * 7 % 101 for i in ids]}, schema=SCHEMA)


def _table(
    tmp_path: Path, layout: dict[str, int], rows: int = 50, **conf: str
) -> tuple[str, pa.Table]:
    """A table partitioned by ``p`` with ``layout[p]`` files of ``rows`` rows each; returns
    its path and every row written."""
    path = str(tmp_path / "t")
    written, start = [], 0
    for part, files in layout.items():
        for _ in range(files):
            data = _batch(start, rows, part)
            first = not written
            deltalog.write_table(
                path,
                data,
                mode="append",
                partition_by=["p"] if first else None,
                configuration=conf if first and conf else None,
            )
            written.append(data)
            start += rows
    return path, pa.concat_tables(written)


def _files(path: str) -> pa.Table:
    return DeltaLog.for_table(path).update().all_files_arrow()


def _last_commit(path: str) -> list[dict[str, Any]]:
    log_dir = Path(path) / "_delta_log"
    last = sorted(log_dir.glob("*.json"))[-1]
    return [json.loads(line) for line in last.read_text().splitlines()]


# -- planning --------------------------------------------------------------------------------------


def test_bins_pack_small_files_per_partition_and_drop_single_file_bins(tmp_path: Path) -> None:
    path, _ = _table(tmp_path, {"a": 4, "b": 1, "c": 3})
    sizes = _files(path).column("size").to_pylist()
    # Room for two files per bin, never three.
    two = OptimizeSettings(min_file_size=2**40, max_file_size=2 * max(sizes))
    assert 3 * min(sizes) > two.max_file_size
    plan = plan_optimize(DeltaLog.for_table(path).update(), settings=two)
    shape = sorted((dict(b.partition_values)["p"], b.num_files) for b in plan.bins)
    # a: 2 + 2; b: its one file is left alone; c: 2 + a single file left alone.
    assert shape == [("a", 2), ("a", 2), ("c", 2)]
    assert plan.considered == 8
    for b in plan.bins:
        assert b.size <= two.max_file_size
        bin_sizes = b.files.column("size").to_pylist()
        assert all(s > 0 for s in bin_sizes)

    everything = OptimizeSettings(min_file_size=2**40, max_file_size=2**40)
    plan = plan_optimize(DeltaLog.for_table(path).update(), settings=everything)
    assert sorted((dict(b.partition_values)["p"], b.num_files) for b in plan.bins) == [
        ("a", 4),
        ("c", 3),
    ]
    # No file is small: nothing to do.
    none_small = OptimizeSettings(min_file_size=min(sizes), max_file_size=2**40)
    assert plan_optimize(DeltaLog.for_table(path).update(), settings=none_small).bins == ()


def test_where_selects_partitions_and_names_partition_columns_only(tmp_path: Path) -> None:
    path, _ = _table(tmp_path, {"a": 2, "b": 2, "c": 2})
    snapshot = DeltaLog.for_table(path).update()
    plan = plan_optimize(snapshot, "p IN ('a', 'c')")
    assert sorted(dict(b.partition_values)["p"] for b in plan.bins) == ["a", "c"]
    assert plan.considered == 4
    plan = plan_optimize(snapshot, ["p >= 'b'", "p != 'c'"])
    assert [dict(b.partition_values)["p"] for b in plan.bins] == ["b"]
    with pytest.raises(errors.InvalidArgumentError) as e:
        plan_optimize(snapshot, "v > 3")
    assert e.value.error_class == "DELTA_NON_PARTITION_COLUMN_REFERENCE"
    assert "'v'" in str(e.value) and "[p]" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        plan_optimize(snapshot, "p = 'a' AND id = 1")


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        # The right-hand sides are what Spark 4.3's own parser prints for the same text
        # (``sqlParser.parseExpression(text).simpleString``), which delta-spark records.
        ("key = 'a'", "('key = a)"),
        ("p <> 'c'", "NOT ('p = c)"),
        ("a = 1 AND b >= 2.5", "(('a = 1) AND ('b >= 2.5))"),
        ("d = DATE '2024-01-02' OR x IS NULL", "(('d = 2024-01-02) OR isnull('x))"),
        ("k NOT IN (1, 2)", "NOT 'k IN (1,2)"),
        ("`my col` = true", "('my col = true)"),
        ("ts > TIMESTAMP '2024-01-02 03:04:05'", "('ts > 2024-01-02 03:04:05)"),
    ],
)
def test_partition_filters_are_recorded_as_spark_prints_them(text: str, printed: str) -> None:
    assert simple_string(parse_predicate(text)) == printed


def test_z_order_columns_are_checked(tmp_path: Path) -> None:
    path, _ = _table(tmp_path, {"a": 1}, **{"delta.dataSkippingNumIndexedCols": "1"})
    snapshot = DeltaLog.for_table(path).update()
    for cols, error_class in [
        (["p"], "DELTA_ZORDERING_ON_PARTITION_COLUMN"),
        (["nope"], "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"),
        (["id", "v"], "DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS"),
    ]:
        with pytest.raises(errors.InvalidArgumentError) as e:
            plan_optimize(snapshot, z_order_by=cols)
        assert e.value.error_class == error_class
    # Z-order rewrites every partition, single files included.
    plan = plan_optimize(snapshot, z_order_by=["ID"])
    assert plan.z_order_by == ("id",) and [b.num_files for b in plan.bins] == [1]
    unchecked = OptimizeSettings(check_z_order_stats=False)
    assert plan_optimize(snapshot, z_order_by=["v"], settings=unchecked).z_order_by == ("v",)


def test_files_with_many_deleted_rows_are_candidates(tmp_path: Path) -> None:
    path, _ = _table(
        tmp_path, {"a": 1, "b": 1, "c": 2}, rows=100, **{"delta.enableDeletionVectors": "true"}
    )
    deltalog.delete(path, "p = 'a' AND id < 10")  # 10% of a's file
    deltalog.delete(path, "p = 'b' AND id = 100")  # 1% of b's file
    snapshot = DeltaLog.for_table(path).update()
    assert (
        sum(dv is not None for dv in snapshot.all_files_arrow()["deletionVector"].to_pylist()) == 2
    )
    by_ratio = OptimizeSettings(min_file_size=0)
    plan = plan_optimize(snapshot, settings=by_ratio)
    # a's vector must be purged even though the file is alone in its bin; b stays under 5%.
    assert [(dict(b.partition_values)["p"], b.num_files) for b in plan.bins] == [("a", 1)]
    looser = OptimizeSettings(min_file_size=0, max_deleted_rows_ratio=0.2)
    assert plan_optimize(snapshot, settings=looser).bins == ()
    stricter = OptimizeSettings(min_file_size=0, max_deleted_rows_ratio=0.0)
    assert len(plan_optimize(snapshot, settings=stricter).bins) == 2


# -- the plain-Python run --------------------------------------------------------------------------


def test_optimize_keeps_rows_leaves_fewer_files_and_logs_like_the_reference(
    tmp_path: Path,
) -> None:
    path, written = _table(tmp_path, {"a": 5, "b": 1, "c": 4})
    version = DeltaLog.for_table(path).update().version
    metrics = deltalog.optimize(path, where="p != 'c'")
    files = _files(path)
    by_part = [dict(pv)["p"] for pv in files.column("partitionValues").to_pylist()]
    assert sorted(by_part) == ["a", "b"] + ["c"] * 4
    assert canonical(oracle_rows(path)) == canonical(written)
    assert canonical(duckdb_rows(path)) == canonical(written)
    assert canonical(duckdb_rows(path, where="p = 'a' AND id < 20")) == canonical(
        written.filter(pa.compute.less(written["id"], 20))
    )

    actions = _last_commit(path)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["readVersion"] == version
    assert info["operationParameters"] == {
        "predicate": '["NOT (\'p = c)"]',
        "zOrderBy": "[]",
        "clusterBy": "[]",
        "auto": False,
    }
    assert info["isolationLevel"] == "SnapshotIsolation" and info["isBlindAppend"] is False
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert len(adds) == 1 and len(removes) == 5
    assert all(a["dataChange"] is False for a in [*adds, *removes])
    assert json.loads(adds[0]["stats"])["numRecords"] == 250
    size = str(adds[0]["size"])
    assert info["operationMetrics"] == {
        "numAddedFiles": "1",
        "numRemovedFiles": "5",
        "numAddedBytes": size,
        "numRemovedBytes": str(sum(r["size"] for r in removes)),
        "numDeletionVectorsRemoved": "0",
        "minFileSize": size,
        "p25FileSize": size,
        "p50FileSize": size,
        "p75FileSize": size,
        "maxFileSize": size,
    }
    assert metrics["numFilesAdded"] == 1 and metrics["numFilesRemoved"] == 5
    assert metrics["filesAdded"]["totalSize"] == adds[0]["size"]
    assert metrics["partitionsOptimized"] == 1 and metrics["numBins"] == 1
    assert metrics["totalConsideredFiles"] == 6 and metrics["totalFilesSkipped"] == 1
    history = deltalake.DeltaTable(path).history(1)[0]
    assert history["operation"] == "OPTIMIZE"

    # Nothing left to compact: no commit.
    again = deltalog.optimize(path, where="p != 'c'")
    assert again["numFilesAdded"] == 0 and again["numBins"] == 0
    assert DeltaLog.for_table(path).update().version == version + 1


def test_optimize_purges_deletion_vectors(tmp_path: Path) -> None:
    path, written = _table(tmp_path, {"a": 3}, **{"delta.enableDeletionVectors": "true"})
    deltalog.delete(path, "v < 30")
    expected = oracle_rows(path)
    assert expected.num_rows < written.num_rows
    metrics = deltalog.optimize(path)
    files = _files(path)
    assert files.num_rows == 1 and files["deletionVector"].to_pylist() == [None]
    assert canonical(oracle_rows(path)) == canonical(expected)
    assert canonical(duckdb_rows(path)) == canonical(expected)
    stats = json.loads(files["stats"][0].as_py())
    assert stats["numRecords"] == expected.num_rows and stats["tightBounds"] is True
    info = _last_commit(path)[0]["commitInfo"]
    removed_dvs = int(info["operationMetrics"]["numDeletionVectorsRemoved"])
    assert removed_dvs == metrics["deletionVectorStats"]["numDeletionVectorsRemoved"] >= 1


def test_compaction_reads_mapped_columns_added_columns_and_vectors(tmp_path: Path) -> None:
    # One scan reads a bin's files: physical (mapped) names, a column older files lack (null
    # there), a nested column and deletion vectors applied by row position in each file.
    path = str(tmp_path / "t")
    config = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
    old = pa.table(
        {
            "id": pa.array(range(40), pa.int64()),
            "s": pa.array([{"x": i} for i in range(40)]),
            "p": ["a"] * 40,
        }
    )
    deltalog.write_table(path, old.slice(0, 20), partition_by=["p"], configuration=config)
    deltalog.write_table(path, old.slice(20, 20), mode="append")
    new = pa.table(
        {
            "id": pa.array([40, 41], pa.int64()),
            "s": [{"x": 40}, None],
            "p": ["a", "a"],
            "e": [1.5, None],
        }
    )
    deltalog.write_table(path, new, mode="append", schema_mode="merge")
    deltalog.delete(path, "id % 7 = 3")
    deltalog.optimize(path)
    assert _files(path).num_rows == 1
    ids = [i for i in range(42) if i % 7 != 3]
    expected = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([{"x": i} if i != 41 else None for i in ids]),
            "p": ["a"] * len(ids),
            "e": [{40: 1.5}.get(i) for i in ids],
        }
    )
    # DuckDB's delta extension 1.5.5 reads a column-mapped table's partition column as null
    # unless it is the schema's first column (deltalake reads it): deltalake only here.
    assert canonical(oracle_rows(path)) == canonical(expected)


def test_change_data_feed_shows_nothing_for_optimize(tmp_path: Path) -> None:
    path, written = _table(tmp_path, {"a": 3, "b": 2}, **{"delta.enableChangeDataFeed": "true"})
    deltalog.optimize(path)
    version = DeltaLog.for_table(path).update().version
    table = deltalake.DeltaTable(path)
    at_optimize = table.load_cdf(starting_version=version, ending_version=version).read_all()
    assert at_optimize.num_rows == 0
    everything = pa.table(table.load_cdf(starting_version=0).read_all())
    assert everything.num_rows == written.num_rows
    assert set(everything["_change_type"].to_pylist()) == {"insert"}


def test_concurrent_appends_do_not_conflict_but_deletes_of_compacted_files_do(
    tmp_path: Path,
) -> None:
    path, written = _table(tmp_path, {"a": 3, "b": 3})
    log = DeltaLog.for_table(path)

    def prepared(where: str) -> tuple[Any, Any, list[Any], Any]:
        log.update()
        txn = log.start_transaction()
        assert txn.snapshot is not None
        plan = plan_optimize(txn.snapshot, where)
        plan.track_reads(txn)
        adds = write_bins(plan, log.store)
        removes = remove_actions(plan.files, 0)
        op = plan.operation.with_metrics(commit_metrics(adds, removes))
        return txn, plan, [*removes, *adds], op

    # A blind append into the very partition being compacted does not conflict.
    txn, plan, actions, op = prepared("p = 'a'")
    extra = _batch(1000, 5, "a")
    deltalog.write_table(path, extra, mode="append")
    commit(log, txn, plan, actions, op)
    assert canonical(oracle_rows(path)) == canonical(pa.concat_tables([written, extra]))

    # A delete that rewrites a compacted file does.
    txn, plan, actions, op = prepared("p = 'b'")
    deltalog.delete(path, "id = 160")
    with pytest.raises(errors.ConcurrentDeleteReadException):
        commit(log, txn, plan, actions, op)

    # A delete elsewhere does not: its files were not read.
    txn, plan, actions, op = prepared("p = 'b'")
    deltalog.delete(path, "id = 1")
    version = commit(log, txn, plan, actions, op)
    assert _last_commit(path)[0]["commitInfo"]["readVersion"] == version - 2
    kept = written.filter(pa.compute.invert(pa.compute.is_in(written["id"], pa.array([1, 160]))))
    assert canonical(oracle_rows(path)) == canonical(pa.concat_tables([kept, extra]))


# -- Z-order ---------------------------------------------------------------------------------------


def _overlapping(files: pa.Table, column: str, value: int) -> int:
    """Files whose [min, max] of ``column`` may hold ``value``."""
    hits = 0
    for text in files["stats"].to_pylist():
        stats = json.loads(text)
        if stats["minValues"][column] <= value <= stats["maxValues"][column]:
            hits += 1
    return hits


def test_z_order_clusters_rows_for_data_skipping(tmp_path: Path) -> None:
    path = str(tmp_path / "z")
    n = 4000
    # x and y independent of the write order: every input file spans both ranges.
    xs = [(i * 7919) % n for i in range(n)]
    ys = [(i * 104729) % n for i in range(n)]
    data = pa.table({"x": xs, "y": ys, "pad": [f"row-{i:06d}" for i in range(n)]})
    for k in range(8):
        deltalog.write_table(path, data.slice(k * 500, 500), mode="append")
    before = _files(path)
    total = sum(before["size"].to_pylist())
    metrics = deltalog.optimize(path, target_size=total // 4, z_order_by=["x", "y"])
    after = _files(path)
    assert after.num_rows == 4 == metrics["numFilesAdded"]
    assert metrics["zOrderStats"]["numOutputCubes"] == 1
    assert canonical(oracle_rows(path)) == canonical(data)
    params = _last_commit(path)[0]["commitInfo"]["operationParameters"]
    assert params["zOrderBy"] == '["x","y"]'
    for column in ("x", "y"):
        points = range(0, n, 97)
        hits_before = sum(_overlapping(before, column, v) for v in points)
        hits_after = sum(_overlapping(after, column, v) for v in points)
        assert hits_before > 7 * len(points)  # nearly every file spans nearly every value
        assert hits_after < hits_before / 2


def test_z_values_interleave_range_ids() -> None:
    rows = pa.table({"a": [0, 1, 0, 1, None], "b": [0, 0, 1, 1, 0]})
    z = z_order_keys(rows, ["a", "b"]).to_pylist()
    # Range ids: NULL -> 0, then dense ranks from 1 (a: 0 -> 1, 1 -> 2; b: 0 -> 1, 1 -> 2).
    # Bit i of a goes to 2i + 1, bit i of b to 2i.
    assert z == [0b11, 0b1001, 0b110, 0b1100, 0b1]


def test_optimize_clusters_a_liquid_table_by_its_clustering_columns(tmp_path: Path) -> None:
    from deltalog.commands.ddl.create_table import TableSpec, create_table
    from deltalog.schema import schema_from_arrow

    path = str(tmp_path / "liquid")
    n = 4000
    xs = [(i * 7919) % n for i in range(n)]
    ys = [(i * 104729) % n for i in range(n)]
    data = pa.table({"x": xs, "y": ys, "pad": [f"row-{i:06d}" for i in range(n)]})
    create_table(path, "create", TableSpec(schema_from_arrow(data.schema), cluster_by=("y", "x")))
    for k in range(8):
        deltalog.write_table(path, data.slice(k * 500, 500), mode="append")
    before = _files(path)

    with pytest.raises(errors.InvalidArgumentError, match="DELTA_CLUSTERING_WITH_ZORDER_BY"):
        deltalog.optimize(path, z_order_by=["x"])
    with pytest.raises(
        errors.InvalidArgumentError, match="DELTA_CLUSTERING_WITH_PARTITION_PREDICATE"
    ):
        deltalog.optimize(path, where="x = 1")

    total = sum(before["size"].to_pylist())
    metrics = deltalog.optimize(path, target_size=total // 4)
    after = _files(path)
    assert after.num_rows == 4 == metrics["numFilesAdded"]
    assert canonical(oracle_rows(path)) == canonical(data)
    assert canonical(duckdb_rows(path)) == canonical(data)
    commit = _last_commit(path)
    params = commit[0]["commitInfo"]["operationParameters"]
    assert (params["clusterBy"], params["zOrderBy"]) == ('["y","x"]', "[]")
    adds = [a["add"] for a in commit if "add" in a]
    assert len(adds) == 4 and all(a["clusteringProvider"] == "liquid" for a in adds)
    assert all(a["dataChange"] is False for a in adds)
    for column in ("x", "y"):  # clustered on both columns: point lookups touch fewer files
        points = range(0, n, 97)
        hits_before = sum(_overlapping(before, column, v) for v in points)
        hits_after = sum(_overlapping(after, column, v) for v in points)
        assert hits_after < hits_before / 2
