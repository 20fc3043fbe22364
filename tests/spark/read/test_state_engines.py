"""The driver and Spark engines give the same state (classic session; Connect in a subprocess)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors
from deltalog.log.replay import InMemoryLogReplay
from deltalog.spark.read.state import replay_partition
from tests.conformance.oracle import TABLES

pytestmark = pytest.mark.spark
import deltalake  # noqa: E402 (the oracle is required: a missing one fails the suite)

REPRESENTATIVE = [
    "delta-golden/checkpoint",  # classic checkpoint + tail
    "delta-golden/multi-part-checkpoint",
    "delta-golden/v2-checkpoint-json",  # V2 + sidecars
    "delta-golden/v2-checkpoint-parquet",
    "delta-golden/dv-partitioned-with-checkpoint",  # DVs across a checkpoint
    "delta-golden/log-replay-dv-key-cases",
    "delta-golden/canonicalized-paths-special-b",  # path canonicalization
    "delta-golden/delete-re-add-same-file-different-transactions",
    "delta-rs/checkpoint_with_partitions",
    "delta-rs/cdf-table-with-cdc-and-dvs",
    "delta-rs/table_with_deletion_logs",
]


def state(snapshot: Any) -> dict[str, Any]:
    return {
        "version": snapshot.version,
        "protocol": snapshot.protocol,
        "metadata": snapshot.metadata,
        "files": snapshot.all_files_arrow().sort_by("path"),
        "tombstones": snapshot.tombstones_arrow().sort_by("path"),
        "txns": sorted(map(repr, snapshot.set_transactions)),
    }


@pytest.mark.parametrize("rel", REPRESENTATIVE)
def test_engines_agree_on_real_tables(spark: Any, rel: str) -> None:
    root = str(TABLES / rel)
    driver = DeltaLog(root, engine="driver").update()
    on_spark = DeltaLog(root, spark=spark, engine="spark").update()
    assert on_spark.engine == "spark"
    a, b = state(driver), state(on_spark)
    for key in a:
        assert a[key] == b[key], key


def fresh_table(root: Path) -> None:
    """A table with live tombstones, transactions and a checkpoint in the middle."""
    for i in range(4):
        data = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "part": pa.array([str(j % 2) for j in range(10)]),
            }
        )
        deltalake.write_deltalake(
            str(root),
            data,
            mode="append",
            partition_by=["part"],
            commit_properties=deltalake.CommitProperties(
                app_transactions=[deltalake.Transaction("app", i)]
            ),
        )
        if i == 1:
            deltalake.DeltaTable(str(root)).create_checkpoint()
    deltalake.DeltaTable(str(root)).delete("id < 15")


def test_engines_agree_with_live_tombstones_and_time_travel(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    fresh_table(root)
    driver_log = DeltaLog(str(root), engine="driver")
    spark_log = DeltaLog(str(root), spark=spark, engine="spark")
    latest = driver_log.update()
    assert latest.tombstones_arrow().num_rows > 0 and latest.set_transactions
    for version in range(latest.version + 1):
        assert state(driver_log.get_snapshot_at(version)) == state(
            spark_log.get_snapshot_at(version)
        )


def test_replaced_snapshot_drops_its_spark_cache(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    fresh_table(root)
    log = DeltaLog(str(root), spark=spark, engine="spark")
    old = log.update()
    old.all_files_arrow()
    df = old._spark_state.dataframe
    assert df.storageLevel.useMemory
    deltalake.write_deltalake(
        str(root), pa.table({"id": pa.array([99], pa.int64()), "part": ["1"]}), mode="append"
    )
    new = log.update()
    assert new.version == old.version + 1
    assert not df.storageLevel.useMemory and not df.storageLevel.useDisk


def test_corrupt_commits_on_spark_are_typed_errors(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    fresh_table(root)
    last = sorted((root / "_delta_log").glob("*.json"))[-1]
    original = last.read_text()
    # A truncated write damages the end of the file: found on the driver, before any job.
    last.write_text(original + '{"add": {"path": "trunc')
    with pytest.raises(errors.InvalidTableError) as info:
        DeltaLog(str(root), spark=spark, engine="spark").update()
    assert info.value.error_class == "DELTA_CORRUPT_COMMIT"
    # A broken file action inside a commit is only read by Spark: its job fails, typed.
    last.write_text('{"add": {"path": "broken", "size": \n' + original)
    snapshot = DeltaLog(str(root), spark=spark, engine="spark").update()
    with pytest.raises(errors.InvalidTableError) as info:
        snapshot.all_files_arrow()
    assert info.value.error_class == "DELTA_CORRUPT_LOG"


def test_auto_engine_picks_spark_for_large_logs(spark: Any, monkeypatch: Any) -> None:
    import deltalog.log.snapshots as module

    root = str(TABLES / "delta-golden/checkpoint")
    assert DeltaLog(root, spark=spark).update().engine == "driver"
    monkeypatch.setattr(module, "SPARK_ENGINE_THRESHOLD_BYTES", 0)
    assert DeltaLog(root, spark=spark).update().engine == "spark"


def test_partition_function_is_the_replay_class() -> None:
    # What runs in mapInArrow is InMemoryLogReplay over one partition: check it directly on
    # Arrow batches, including the version column it drops.
    replay = InMemoryLogReplay()
    from deltalog.actions import AddFile, Protocol, RemoveFile

    replay.append(0, [Protocol(1, 2), AddFile("a", {}, 1, 1, True), AddFile("b", {}, 1, 1, True)])
    replay.append(1, [RemoveFile("a", 2**62, True)])
    rows = replay.checkpoint().select(["add", "remove"]).slice(2)  # the file rows
    batch = rows.append_column("version", pa.array([0] * rows.num_rows, pa.int64()))
    out = pa.Table.from_batches(
        list(replay_partition(iter(batch.to_batches()), min_file_retention_timestamp=None))
    )
    assert out.equals(rows)


def _scaled(segment: Any, factor: int) -> Any:
    """``segment`` with every file ``factor`` times its size."""
    from dataclasses import replace

    def grow(f: Any) -> Any:
        return replace(f, file=replace(f.file, size=f.file.size * factor))

    cp = segment.checkpoint
    return replace(
        segment,
        checkpoint=None if cp is None else replace(cp, files=tuple(map(grow, cp.files))),
        commits=tuple(map(grow, segment.commits)),
    )


def test_state_partitions_follow_the_log_size_unless_set() -> None:
    from deltalog.spark.read.state import (
        DEFAULT_SNAPSHOT_PARTITIONS,
        LOG_BYTES_PER_PARTITION,
        state_partitions,
    )

    # a checkpoint and commits after it, a few KiB: one Python task replays them
    segment = DeltaLog(str(TABLES / "delta-rs/simple_table_with_checkpoint")).update().segment
    size = segment.checkpoint.size_in_bytes + sum(c.file.size for c in segment.commits)
    assert 0 < size < LOG_BYTES_PER_PARTITION
    assert state_partitions("", segment) == 1
    assert state_partitions("7", segment) == 7  # the setting wins, as in the reference
    factor = -(-3 * LOG_BYTES_PER_PARTITION // size)  # just over 3 partitions' worth
    assert state_partitions("", _scaled(segment, factor)) == 4
    assert state_partitions("", _scaled(segment, 10**6)) == DEFAULT_SNAPSHOT_PARTITIONS
    # a V2 checkpoint's sidecars are not in the segment: the reference's 50
    v2 = DeltaLog(str(TABLES / "delta-golden/v2-checkpoint-parquet")).update().segment
    assert state_partitions("", v2) == DEFAULT_SNAPSHOT_PARTITIONS


# The Spark engine over Spark Connect and on local-cluster: tests/spark/test_read_tiers.py.


@pytest.mark.parametrize(
    "rel",
    [
        "delta-golden/parquet-all-types",
        "delta-golden/table-with-columnmapping-mode-id",
        "delta-golden/data-reader-map",
        "delta-golden/spark-variant-checkpoint",
        "delta-golden/decimal-various-scale-precision",
    ],
)
def test_schemas_convert_to_spark_and_back(spark: Any, rel: str) -> None:
    from deltalog.spark.schema import from_spark_schema, to_spark_schema

    schema = DeltaLog(str(TABLES / rel)).update().schema
    if "variant" in schema.to_json() and int(spark.version.split(".")[0]) < 4:
        with pytest.raises(errors.UnsupportedFeatureError, match="PySpark 3"):
            to_spark_schema(schema)
        return
    spark_schema = to_spark_schema(schema)
    assert [f.name for f in spark_schema.fields] == schema.names
    assert from_spark_schema(spark_schema) == schema
    # Spark accepts it as a read schema (an empty DataFrame of that shape).
    assert spark.createDataFrame([], spark_schema).schema == spark_schema


def test_v2_checkpoint_sidecars_written_in_spark_tasks(spark: Any, tmp_path: Path) -> None:
    """Above the threshold, a Spark-engine snapshot of a V2 table writes its sidecars in tasks
    (one per state partition); the checkpoint holds the file actions the driver writer puts in
    its own on a copy, and with the commits gone DuckDB reads the input's rows from it."""
    import json
    import shutil

    import pyarrow.parquet as pq

    import deltalog
    from deltalog.log.reader import checkpoint_sidecar_paths
    from deltalog.spark.read.state import CHECKPOINT_THRESHOLD_KEY
    from deltalog.storage.local import LocalLogStore
    from tests.conformance.rows import canonical, duckdb_rows
    from tests.unit.log.test_checkpoint_writer import drop_log_files_through

    root = tmp_path / "v2"
    data = pa.table({"id": pa.array(range(80), pa.int64()), "p": [str(i % 2) for i in range(80)]})
    deltalog.write_table(
        str(root),
        data,
        partition_by=["p"],
        configuration={"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "1000"},
        max_records_per_file=10,
    )
    deltalog.delete(str(root), "id < 20")  # tombstones
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)

    spark.conf.set(CHECKPOINT_THRESHOLD_KEY, "1")
    try:
        DeltaLog(str(root), spark=spark, engine="spark").checkpoint()
    finally:
        spark.conf.unset(CHECKPOINT_THRESHOLD_KEY)
    DeltaLog(str(copy), engine="driver").checkpoint()

    def file_actions(table: Path) -> tuple[int, list[str]]:
        DeltaLog.clear_cache()
        s = DeltaLog(str(table), engine="driver").update()
        cp = s.segment.checkpoint
        assert cp is not None and cp.version == s.version == 1
        paths = checkpoint_sidecar_paths(LocalLogStore(), cp, table=str(table))
        rows = pa.concat_tables([pq.read_table(p) for p in paths])
        actions = [
            json.dumps({k: v for k, v in r.items() if v is not None}, sort_keys=True, default=str)
            for r in rows.to_pylist()
        ]
        return len(paths), sorted(actions)

    (n_ours, ours), (_, theirs) = file_actions(root), file_actions(copy)
    assert n_ours > 1  # several tasks wrote
    assert ours == theirs and sum('"add"' in a for a in ours) == 6
    drop_log_files_through(root, 1, keep=DeltaLog(str(root), engine="driver").update())
    expected = data.filter(pa.compute.greater_equal(data["id"], 20))
    assert canonical(duckdb_rows(str(root))) == canonical(expected)
