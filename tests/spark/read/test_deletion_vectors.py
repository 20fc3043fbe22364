"""Reads of tables whose files have deletion vectors, with the vectors applied in the executors
(the session's ``spark.deltalog.deletionVectors.broadcastRows`` set to 0 for the test); the
broadcast path below the threshold is what every other read test takes. Expected rows come
from deltalake (delta-rs), or from the inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.spark.read.deletion_vectors import BROADCAST_ROWS_KEY, VectorSet, _VectorCache
from deltalog.spark.read.scan import read_snapshot
from deltalog.spark.session import to_arrow
from deltalog.storage.options import StorageOptions
from deltalog.tables import DeltaTable
from deltalog.write.deletion_vectors import DeletionVectorWriter, inline_descriptor
from tests.conformance.oracle import TABLES
from tests.conformance.rows import assert_same_rows, oracle_rows
from tests.spark.confs import session_confs

pytestmark = pytest.mark.spark

SHARED = [
    "delta-golden/dv-partitioned-with-checkpoint",  # partition values from the paths
    "delta-golden/dv-with-columnmapping",
    "delta-rs/table-with-dv-small",
    "delta-rs/table_with_deletion_logs",
]


def executor_path(spark: Any) -> Any:
    """Every vector applied in the executors for the block; the setting restored after."""
    return session_confs(spark, {BROADCAST_ROWS_KEY: "0"})


def _applied_in_executors(df: Any) -> bool:
    plan = str(df._jdf.queryExecution().executedPlan().toString())
    return "ArrowEvalPython" in plan and "LeftAnti" not in plan


@pytest.mark.parametrize("rel", SHARED)
def test_shared_tables_in_the_executors(spark: Any, rel: str) -> None:
    root = str(TABLES / rel)
    log = DeltaLog(root)
    with executor_path(spark):
        df = read_snapshot(spark, log.update(), log.store)
        assert _applied_in_executors(df)
        assert_same_rows(to_arrow(df), oracle_rows(root))


def test_deltalog_deletes_in_the_executors(spark: Any, tmp_path: Path) -> None:
    """Vectors written by deltalog's own DELETE (in files, merged with older ones, inline),
    the DELETEs' own scans applying the older vectors in the executors; read whole, filtered
    and by format("delta"), against deltalake's read."""
    import deltalake

    root = str(tmp_path / "t")
    for i in range(4):  # four files of 500 rows
        ids = pa.array(range(i * 500, (i + 1) * 500), pa.int64())
        data = pa.table({"id": ids, "name": pa.array([f"n{v}" for v in ids.to_pylist()])})
        configuration = {"delta.enableDeletionVectors": "true"}
        deltalake.write_deltalake(root, data, mode="append", configuration=configuration)
    with executor_path(spark):
        table = DeltaTable.forPath(spark, root)
        table.delete("id % 3 = 0 AND id < 1500")  # three files get a vector
        table.delete("id % 5 = 0 AND id < 1000")  # two of them get a merged one
        table.delete("id IN (1501, 1777)")  # the fourth: a vector inline in the log
        vectors = DeltaLog(root).update().all_files_arrow()["deletionVector"].to_pylist()
        assert sorted(dv["storageType"] for dv in vectors) == ["i", "u", "u", "u"]
        expected = pa.table(
            {
                "id": [
                    v
                    for v in range(2000)
                    if not (v % 3 == 0 and v < 1500)
                    and not (v % 5 == 0 and v < 1000)
                    and v not in (1501, 1777)
                ]
            }
        )
        assert_same_rows(oracle_rows(root).select(["id"]), expected)
        source = deltalog.register(spark)
        df = spark.read.format(source).load(root)
        assert _applied_in_executors(df)
        assert_same_rows(to_arrow(df), oracle_rows(root))
        got = sorted(r.id for r in df.where("id BETWEEN 1490 AND 1510").collect())
        assert got == [v for v in expected["id"].to_pylist() if 1490 <= v <= 1510]


@pytest.mark.connect
def test_executors_over_connect(connect_spark: Any) -> None:
    root = str(TABLES / "delta-golden/dv-partitioned-with-checkpoint")
    source = deltalog.register(connect_spark)
    with executor_path(connect_spark):
        df = connect_spark.read.format(source).load(root)
        assert_same_rows(to_arrow(df), oracle_rows(root))


def test_vector_set_answers_per_row(tmp_path: Path) -> None:
    """Rows of several files in one batch, files without a vector (-1), an inline vector and
    one in a file."""
    stored = np.array([0, 2, 3, 70_000, 2**33], np.uint64)
    store = deltalog.storage.store_for(str(tmp_path))
    with DeletionVectorWriter(store, str(tmp_path), inline_max_size=0) as writer:
        in_file = writer.add(stored)
    inline = inline_descriptor(np.array([1, 5], np.uint64))
    vectors = VectorSet(str(tmp_path), (in_file, inline), StorageOptions())
    numbers = np.array([0, 0, 0, 0, 1, 1, 1, -1, 0, 0], np.int32)
    rows = np.array([0, 1, 3, 2**33, 1, 2, 5, 0, 70_000, 2**34], np.int64)
    expected = [True, False, True, True, True, False, True, False, True, False]
    assert vectors.deleted(numbers, rows).tolist() == expected
    assert vectors.deleted(np.full(3, 1, np.int32), np.array([5, 6, 1])).tolist() == [
        True,
        False,
        True,
    ]
    assert vectors.deleted(np.full(2, -1, np.int32), np.array([0, 1])).tolist() == [False] * 2
    assert in_file.storage_type == "u"


def test_worker_cache_keeps_the_recent_vectors_within_its_budget() -> None:
    cache = _VectorCache(budget=32)
    first, second, big = (("/t", inline_descriptor(np.array([i], np.uint64))) for i in range(3))
    cache.put(first, np.zeros(3, np.int64))  # 24 bytes
    assert cache.get(first) is not None
    cache.put(second, np.zeros(2, np.int64))  # 40 bytes in all: the older one goes
    assert cache.get(first) is None and cache.get(second) is not None
    assert len(cache.put(big, np.zeros(10, np.int64))) == 10  # over budget alone: kept
    assert cache.get(big) is not None and cache.get(second) is None
