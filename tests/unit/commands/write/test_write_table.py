"""``deltalog.write_table``: every mode and option, read back by delta-rs and DuckDB.

Expected rows are computed here from the inputs (plain Python), never by deltalog."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors, write_table
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows


def _rows(ids: range | list[int], p: str | None = "a") -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([p] * len(ids), pa.string()),
            "v": pa.array([f"v{i}" for i in ids], pa.string()),
        }
    )


def _expected(*tables: pa.Table) -> list[str]:
    rows: list[dict[str, Any]] = []
    for t in tables:
        rows += t.to_pylist()
    return canonical(pa.Table.from_pylist(rows, schema=tables[0].schema)) if rows else []


def _both(root: Path, version: int | None = None) -> tuple[list[str], list[str]]:
    return canonical(oracle_rows(str(root), version)), canonical(duckdb_rows(str(root), version))


def _commit_info(root: Path, version: int) -> dict[str, Any]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return json.loads(text.splitlines()[0])["commitInfo"]


def test_modes_at_every_version(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a, b, c = _rows(range(5)), _rows(range(5, 8), "b"), _rows(range(100, 102), "c")
    assert write_table(str(root), a, partition_by=["p"]) == 0
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), b)
    assert e.value.error_class == "DELTA_PATH_EXISTS"
    assert write_table(str(root), b, mode="ignore") is None
    assert write_table(str(root), b, mode="append") == 1
    assert write_table(str(root), c, mode="overwrite") == 2
    expected = {0: _expected(a), 1: _expected(a, b), 2: _expected(c)}
    for version, rows in expected.items():
        assert _both(root, version) == (rows, rows)
    assert _commit_info(root, 0)["operationParameters"]["mode"] == "ErrorIfExists"
    info = _commit_info(root, 2)
    assert info["operationParameters"] == {"mode": "Overwrite", "partitionBy": '["p"]'}
    assert info["isBlindAppend"] is False
    assert info["operationMetrics"]["numRemovedFiles"] == "2"
    assert info["operationMetrics"]["numOutputRows"] == "2"


def test_replace_where_on_a_partition(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a, b = _rows(range(5), "a"), _rows(range(5, 9), "b")
    write_table(str(root), a, partition_by=["p"])
    write_table(str(root), b, mode="append")
    new = _rows(range(50, 52), "b")
    assert write_table(str(root), new, mode="overwrite", predicate="p = 'b'") == 2
    assert _both(root) == (_expected(a, new),) * 2
    outside = _rows([7], "a")
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), outside, mode="overwrite", predicate="p = 'b'")
    assert e.value.error_class == "DELTA_REPLACE_WHERE_MISMATCH"
    assert DeltaLog.for_table(str(root)).update().version == 2


def test_replace_where_on_a_data_column_rewrites_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a = _rows(range(10), None)
    write_table(str(root), a)
    new = pa.table({"id": pa.array([3, 4], pa.int64()), "p": ["x", "y"], "v": ["new3", "new4"]})
    assert write_table(str(root), new, mode="overwrite", predicate="id >= 3 AND id < 5") == 1
    kept = [r for r in a.to_pylist() if not 3 <= r["id"] < 5] + new.to_pylist()
    assert _both(root) == (canonical(pa.Table.from_pylist(kept, schema=a.schema)),) * 2
    metrics = _commit_info(root, 1)["operationMetrics"]
    assert metrics["numDeletedRows"] == "2" and metrics["numCopiedRows"] == "8"


def test_dynamic_partition_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a, b, c = _rows(range(3), "a"), _rows(range(3, 6), "b"), _rows(range(6, 9), "c")
    write_table(str(root), pa.concat_tables([a, b, c]), partition_by=["p"])
    new_b = _rows(range(60, 62), "b")
    assert write_table(str(root), new_b, mode="overwrite", partition_overwrite_mode="dynamic") == 1
    assert _both(root) == (_expected(a, c, new_b),) * 2
    assert _commit_info(root, 1)["operationParameters"]["isDynamicPartitionOverwrite"] is True


def test_dynamic_partition_overwrite_compares_typed_values(tmp_path: Path) -> None:
    """A partition is the same partition however its value was serialized: delta-rs writes
    ``2021-01-01 00:00:00.000000`` and ``-0`` where deltalog writes ``2021-01-01T00:00:00.000000Z``
    and ``-0.0``; Spark's ``<=>`` (what delta-spark's overwrite matches by) says they are equal,
    and ``-0.0 <=> 0.0`` too."""
    root = tmp_path / "t"
    utc = pa.timestamp("us", "UTC")
    first = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
    old = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "ts": pa.array([first, first + dt.timedelta(days=1)], utc),
            "d": pa.array([-0.0, 1.5]),
        }
    )
    deltalake.write_deltalake(str(root), old, partition_by=["ts", "d"])
    new = pa.table(
        {"id": pa.array([3], pa.int64()), "ts": pa.array([first], utc), "d": pa.array([0.0])}
    )
    write_table(str(root), new, mode="overwrite", partition_overwrite_mode="dynamic")
    assert sorted(oracle_rows(str(root)).column("id").to_pylist()) == [2, 3]


def test_schema_merge_and_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a = _rows(range(3))
    write_table(str(root), a)
    wider = a.append_column("extra", pa.array([1.5, None, 2.5]))
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), wider, mode="append")
    assert e.value.error_class == "DELTA_METADATA_MISMATCH"
    assert write_table(str(root), wider, mode="append", schema_mode="merge") == 1
    first = [dict(r, extra=None) for r in a.to_pylist()]
    assert (
        _both(root)
        == (canonical(pa.Table.from_pylist(first + wider.to_pylist(), schema=wider.schema)),) * 2
    )
    other = pa.table({"k": pa.array(["x"], pa.string())})
    assert write_table(str(root), other, mode="overwrite", schema_mode="overwrite") == 2
    assert _both(root) == (canonical(other),) * 2


def test_wrong_type_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _rows(range(3)))
    bad = pa.table({"id": pa.array(["x"]), "p": ["a"], "v": ["v"]})
    files_before = sorted(os.listdir(root))
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), bad, mode="append", schema_mode="merge")
    assert e.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
    assert sorted(os.listdir(root)) == files_before


def test_idempotent_writes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a, b = _rows(range(3)), _rows(range(3, 6))
    assert write_table(str(root), a, txn_app_id="job", txn_version=1) == 0
    assert write_table(str(root), b, mode="append", txn_app_id="job", txn_version=1) is None
    assert write_table(str(root), b, mode="append", txn_app_id="job", txn_version=2) == 1
    assert deltalake.DeltaTable(str(root)).transaction_version("job") == 2
    assert _both(root) == (_expected(a, b),) * 2
    with pytest.raises(errors.InvalidArgumentError):
        write_table(str(root), b, mode="append", txn_app_id="job")


def test_append_only_refuses_overwrite_before_writing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _rows(range(3)), configuration={"delta.appendOnly": "true"})
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), _rows(range(3)), mode="overwrite")
    assert e.value.error_class == "DELTA_CANNOT_MODIFY_APPEND_ONLY"
    assert DeltaLog.for_table(str(root)).update().version == 0


def test_typed_partition_values_and_nasty_strings(tmp_path: Path) -> None:
    root = tmp_path / "t"
    names = ["a b", "x=y", "50%", "a/b", "ünï", None, "", "q:r"]
    data = pa.table(
        {
            "id": pa.array(range(len(names)), pa.int64()),
            "s": pa.array(names, pa.string()),
            "d": pa.array([dt.date(2024, 1, i + 1) for i in range(len(names))], pa.date32()),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, 12, 0, i, 123456, tzinfo=dt.UTC)
                    for i in range(len(names))
                ],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    write_table(str(root), data, partition_by=["s", "d", "ts"])
    expected = [dict(r, s=None if r["s"] == "" else r["s"]) for r in data.to_pylist()]
    want = canonical(pa.Table.from_pylist(expected, schema=data.schema))
    assert _both(root) == (want, want)


def test_check_constraints_and_not_null(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _rows(range(3)), configuration={"delta.constraints.positive": "id >= 0"})
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), _rows([-1]), mode="append")
    assert e.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert "positive" in str(e.value)
    assert write_table(str(root), _rows([5]), mode="append") == 1


def test_deltalake_writes_after_ours_and_we_read_theirs(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a, b, c = _rows(range(3)), _rows(range(3, 5)), _rows(range(5, 7))
    write_table(str(root), a, partition_by=["p"])
    deltalake.write_deltalake(str(root), b, mode="append")
    assert write_table(str(root), c, mode="append") == 2
    assert _both(root) == (_expected(a, b, c),) * 2
    snap = DeltaLog.for_table(str(root)).update()
    assert snap.version == 2 and snap.num_of_files == 3


def test_checkpoints_are_read_by_delta_rs(tmp_path: Path) -> None:
    root = tmp_path / "t"
    parts = [_rows(range(i * 2, i * 2 + 2), "ab"[i % 2]) for i in range(12)]
    write_table(str(root), parts[0], partition_by=["p"])
    for part in parts[1:]:
        write_table(str(root), part, mode="append")
    log_dir = root / "_delta_log"
    assert (log_dir / f"{10:020d}.checkpoint.parquet").exists()
    for v in range(10):  # delta-rs must use the checkpoint now
        (log_dir / f"{v:020d}.json").unlink()
    assert canonical(oracle_rows(str(root))) == _expected(*parts)
    assert canonical(duckdb_rows(str(root))) == _expected(*parts)


def test_stats_are_true_for_their_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table({"id": pa.array([5, 1, None, 9], pa.int64()), "s": ["m", "b", "z", None]})
    write_table(str(root), data)
    adds = DeltaLog.for_table(str(root)).update().all_files_arrow().to_pylist()
    stats = json.loads(adds[0]["stats"])
    assert stats["numRecords"] == 4
    assert stats["minValues"] == {"id": 1, "s": "b"}
    assert stats["maxValues"] == {"id": 9, "s": "z"}
    assert stats["nullCount"] == {"id": 1, "s": 1}
    # A filter that stats would wrongly skip loses rows in both readers.
    dt_table = deltalake.DeltaTable(str(root))
    got = deltalake.QueryBuilder().register("t", dt_table).execute("select id from t where id > 8")
    assert pa.table(got.read_all())["id"].to_pylist() == [9]


def test_identity_columns_continue_past_the_high_water_mark(tmp_path: Path) -> None:
    from deltalog.commands.ddl.create_table import TableSpec, create_table
    from deltalog.schema import parse_schema

    root = str(tmp_path / "t")
    schema = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {
                        "name": "id",
                        "type": "long",
                        "nullable": False,
                        "metadata": {
                            "delta.identity.start": 100,
                            "delta.identity.step": 10,
                            "delta.identity.allowExplicitInsert": False,
                        },
                    },
                    {"name": "v", "type": "string", "nullable": True, "metadata": {}},
                ],
            }
        )
    )
    assert create_table(root, "create", TableSpec(schema)) == 0
    write_table(root, pa.table({"v": ["a", "b", "c"]}), mode="append")
    write_table(root, pa.table({"v": ["d"]}), mode="append")
    rows = sorted(oracle_rows(root).to_pylist(), key=lambda r: r["v"])
    assert [r["id"] for r in rows] == [100, 110, 120, 130]
    field = DeltaLog.for_table(root).update().schema.field("id")
    assert field.metadata["delta.identity.highWaterMark"] == 130
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(root, pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]}), mode="append")
    assert e.value.error_class == "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"


def test_data_change_false_and_max_records_per_file(tmp_path: Path) -> None:
    root = tmp_path / "t"
    a = _rows(range(5))
    assert write_table(str(root), a, max_records_per_file=2) == 0
    assert DeltaLog.for_table(str(root)).update().num_of_files == 3
    assert write_table(str(root), a, mode="overwrite", data_change=False) == 1
    lines = (root / "_delta_log" / f"{1:020d}.json").read_text().splitlines()
    files = [json.loads(x) for x in lines if '"add"' in x or '"remove"' in x]
    assert files and all(next(iter(f.values()))["dataChange"] is False for f in files)
    assert _both(root) == (_expected(a),) * 2
    wider = a.append_column("extra", pa.array([1] * 5))
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(str(root), wider, mode="append", schema_mode="merge", data_change=False)
    assert e.value.error_class == "DELTA_DATA_CHANGE_FALSE"


def test_replace_where_on_a_decimal_partition_removes_only_matching_partitions(
    tmp_path: Path,
) -> None:
    import decimal

    root = tmp_path / "t"
    amounts = [decimal.Decimal(x) for x in ("-5.50", "0.00", "3.25", "10.00")] + [None]
    data = pa.table(
        {
            "id": pa.array(range(len(amounts)), pa.int64()),
            "amount": pa.array(amounts, pa.decimal128(10, 2)),
        }
    )
    write_table(str(root), data, partition_by=["amount"])
    write_table(str(root), data.slice(0, 0), mode="overwrite", predicate="amount > 0")
    kept = [r for r in data.to_pylist() if r["amount"] is None or not r["amount"] > 0]
    assert _both(root) == (canonical(pa.Table.from_pylist(kept, schema=data.schema)),) * 2


def test_replace_where_the_python_evaluator_cannot_decide_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table({"id": pa.array([5, 6, 7], pa.int64()), "p": pa.array([5, 6, 7], pa.int32())})
    write_table(str(root), data, partition_by=["p"])
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        write_table(str(root), data.slice(0, 0), mode="overwrite", predicate="p > 6.5")
    assert e.value.error_class == "DELTA_UNSUPPORTED_PREDICATE"
    assert DeltaLog.for_table(str(root)).update().version == 0
    assert _both(root) == (canonical(data),) * 2


def test_a_write_prepared_on_an_older_version_is_judged_against_later_commits(
    tmp_path: Path,
) -> None:
    # The data source plans a write in one process and commits it from another, on the
    # version it planned on: an overwrite planned before a concurrent append conflicts, an
    # append does not.
    from deltalog.commands.write.write_into_delta import WriteOptions, commit_write, prepare_write
    from deltalog.schema import schema_from_arrow
    from deltalog.write.file_writer import DataFileWriter

    root = tmp_path / "t"
    write_table(str(root), _rows(range(3)))
    write_table(str(root), _rows(range(3, 5)), mode="append")  # version 1, after the plan
    log = DeltaLog.for_table(str(root))
    schema = schema_from_arrow(_rows([]).schema)
    for mode, conflict in (("overwrite", True), ("append", False)):
        plan = prepare_write(log, schema, WriteOptions(mode=mode), read_version=0)
        assert plan.txn.snapshot is not None and plan.txn.snapshot.version == 0
        with DataFileWriter(log.store, plan.layout) as writer:
            adds = writer.write(_rows([7]))
        if conflict:
            with pytest.raises(errors.ConcurrentAppendException):
                commit_write(plan, adds)
        else:
            assert commit_write(plan, adds) == 2
    assert _both(root) == (_expected(_rows(range(5)), _rows([7])),) * 2
    new = prepare_write(
        DeltaLog.for_table(str(tmp_path / "new")), schema, WriteOptions(), read_version=-1
    )
    assert new.txn.snapshot is None and new.new_table


def test_a_merged_column_is_nullable_whatever_the_data_says(tmp_path: Path) -> None:
    # The files written before the merge hold no values for the new column: a non-nullable
    # field would make readers refuse them (delta-rs: "Non-nullable column ... is missing").
    root = tmp_path / "t"
    a = _rows(range(2))
    write_table(str(root), a)
    field = pa.field("extra", pa.int64(), nullable=False)
    wider = a.append_column(field, pa.array([7, 8], pa.int64()))
    write_table(str(root), wider, mode="append", schema_mode="merge")
    extra = json.loads(deltalake.DeltaTable(str(root)).schema().to_json())["fields"][-1]
    assert (extra["name"], extra["nullable"]) == ("extra", True)
    first = [dict(r, extra=None) for r in a.to_pylist()]
    rows = first + wider.to_pylist()
    nullable = wider.schema.set(3, pa.field("extra", pa.int64()))
    assert _both(root) == (canonical(pa.Table.from_pylist(rows, schema=nullable)),) * 2


def test_materialized_partition_columns_are_written_into_every_file(tmp_path: Path) -> None:
    """``materializePartitionColumns`` (reference ``TransactionalWrite``: the feature in the
    protocol makes every writer keep the partition columns in the parquet files)."""
    import pyarrow.parquet as pq

    from deltalog import delete, optimize
    from deltalog.commands.ddl.drop_feature import drop_feature_support
    from deltalog.commands.ddl.protocol_change import set_table_properties

    def file_columns(root: Path) -> list[list[str]]:
        snapshot = DeltaLog.for_table(str(root)).update()
        paths = snapshot.all_files_arrow().column("path").to_pylist()
        return sorted(pq.read_schema(root / p).names for p in paths)

    root = tmp_path / "t"
    conf = {"delta.enableMaterializePartitionColumnsFeature": "true"}
    write_table(str(root), _rows(range(3), "a"), partition_by=["p"], configuration=conf)
    assert "materializePartitionColumns" in (
        DeltaLog.for_table(str(root)).update().protocol.writer_features or ()
    )
    write_table(str(root), _rows(range(3, 5), "b"), mode="append")
    write_table(str(root), _rows(range(5, 7), "b"), mode="append")
    delete(str(root), "id = 1")  # rewrites a file of partition a
    assert file_columns(root) == [["id", "p", "v"]] * 3
    want = _expected(_rows([0, 2], "a"), _rows(range(3, 7), "b"))
    assert _both(root) == (want, want)
    files = (root / "p=b").glob("*.parquet")
    assert {r for f in files for r in pq.read_table(f).column("p").to_pylist()} == {"b"}
    optimize(str(root))
    assert file_columns(root) == [["id", "p", "v"]] * 2
    assert _both(root) == (want, want)
    # an existing table: the property adds the feature, later writes materialize
    other = tmp_path / "u"
    write_table(str(other), _rows(range(2), "a"), partition_by=["p"])
    assert file_columns(other) == [["id", "v"]]
    set_table_properties(str(other), conf)
    write_table(str(other), _rows(range(2, 4), "c"), mode="append")
    assert file_columns(other) == [["id", "p", "v"], ["id", "v"]]
    want = _expected(_rows(range(2), "a"), _rows(range(2, 4), "c"))
    assert _both(other) == (want, want)
    # DROP FEATURE takes the property with it; files written later leave the columns out
    drop_feature_support(str(other), "materializePartitionColumns")
    snapshot = DeltaLog.for_table(str(other)).update()
    assert "materializePartitionColumns" not in (snapshot.protocol.writer_features or ())
    assert "delta.enableMaterializePartitionColumnsFeature" not in snapshot.metadata.configuration
    write_table(str(other), _rows(range(4, 5), "d"), mode="append")
    assert file_columns(other) == [["id", "p", "v"], ["id", "v"], ["id", "v"]]


def test_write_partition_columns_to_parquet_property(tmp_path: Path) -> None:
    """``delta.writePartitionColumnsToParquet`` (RFC materialize-partition-columns; delta-spark
    4.4's ``TransactionalWrite``): ``true`` keeps the partition columns in the data files
    without the writer feature; ``false`` leaves them out (unless the feature requires them)."""
    import pyarrow.parquet as pq

    from deltalog.commands.ddl.protocol_change import set_table_properties

    def file_columns(root: Path) -> list[list[str]]:
        snapshot = DeltaLog.for_table(str(root)).update()
        paths = snapshot.all_files_arrow().column("path").to_pylist()
        return sorted(pq.read_schema(root / p).names for p in paths)

    root = tmp_path / "t"
    conf = {"delta.writePartitionColumnsToParquet": "true"}
    write_table(str(root), _rows(range(3), "a"), partition_by=["p"], configuration=conf)
    snapshot = DeltaLog.for_table(str(root)).update()
    assert "materializePartitionColumns" not in (snapshot.protocol.writer_features or ())
    assert file_columns(root) == [["id", "p", "v"]]
    set_table_properties(str(root), {"delta.writePartitionColumnsToParquet": "false"})
    write_table(str(root), _rows(range(3, 5), "b"), mode="append")
    assert file_columns(root) == [["id", "p", "v"], ["id", "v"]]
    want = _expected(_rows(range(3), "a"), _rows(range(3, 5), "b"))
    assert _both(root) == (want, want)


def test_char_and_varchar_values_are_fitted_as_spark_writes_them(tmp_path: Path) -> None:
    """A table declared with CHAR(3) and VARCHAR(4) (Spark's ``__CHAR_VARCHAR_TYPE_STRING``
    metadata): write_table, UPDATE and MERGE store values padded (CHAR) and trimmed of trailing
    spaces beyond the length, and refuse a longer value with nothing committed."""
    from deltalog.commands.ddl.create_table import TableSpec, create_table
    from deltalog.commands.dml.arrow import merge, update
    from deltalog.schema import CHAR_VARCHAR_KEY, PrimitiveType, StructField, StructType

    root = str(tmp_path / "t")
    string = PrimitiveType("string")
    schema = StructType(
        (
            StructField("id", PrimitiveType("integer"), True, {}),
            StructField("c", string, True, {CHAR_VARCHAR_KEY: "char(3)"}),
            StructField("v", string, True, {CHAR_VARCHAR_KEY: "varchar(4)"}),
        )
    )
    create_table(root, "create", TableSpec(schema))
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "c": ["ab", "abc  ", None],
            "v": ["abcd  ", "", "é"],
        }
    )
    write_table(root, rows, mode="append")
    for bad in ({"id": [9], "c": ["abcd"], "v": ["a"]}, {"id": [9], "c": ["a"], "v": ["abcde"]}):
        with pytest.raises(errors.DeltaWriteError) as e:
            write_table(root, pa.table(bad, schema=rows.schema), mode="append")
        assert e.value.error_class == "EXCEED_LIMIT_LENGTH"
    with pytest.raises(errors.DeltaWriteError, match="EXCEED_LIMIT_LENGTH"):
        update(root, "id = 1", {"v": "abcdef"})
    version = DeltaLog.for_table(root).update().version
    update(root, "id = 3", {"c": "q"})
    source = pa.table({"id": pa.array([2, 4], pa.int32()), "c": ["x ", "y"], "v": ["w", "zz   "]})
    merge(root, source, on="id")
    assert DeltaLog.for_table(root).update().version == version + 2
    want = [(1, "ab ", "abcd"), (2, "x  ", "w"), (3, "q  ", "é"), (4, "y  ", "zz  ")]
    assert sorted(tuple(r.values()) for r in oracle_rows(root).to_pylist()) == want


def test_nested_char_and_varchar_values_are_fitted(tmp_path: Path) -> None:
    """CHAR/VARCHAR inside a struct, an array and a map (the top-level column's
    ``__CHAR_VARCHAR_TYPE_STRING`` holds the declared type, as Spark keeps it): write_table
    fits the nested values as Spark's write does, null structs and lists included, and refuses
    a nested value too long with nothing committed."""
    from deltalog.commands.ddl.create_table import TableSpec, create_table
    from deltalog.schema import (
        CHAR_VARCHAR_KEY,
        ArrayType,
        MapType,
        PrimitiveType,
        StructField,
        StructType,
    )

    root = str(tmp_path / "t")
    string = PrimitiveType("string")
    inner = StructType((StructField("a", string), StructField("n", PrimitiveType("integer"))))
    schema = StructType(
        (
            StructField("s", inner, True, {CHAR_VARCHAR_KEY: "struct<a:varchar(3),n:int>"}),
            StructField("arr", ArrayType(string), True, {CHAR_VARCHAR_KEY: "array<char(2)>"}),
            StructField(
                "m", MapType(string, string), True, {CHAR_VARCHAR_KEY: "map<string,varchar(2)>"}
            ),
        )
    )
    create_table(root, "create", TableSpec(schema))
    arrow = pa.schema(
        [
            ("s", pa.struct([("a", pa.string()), ("n", pa.int32())])),
            ("arr", pa.list_(pa.string())),
            ("m", pa.map_(pa.string(), pa.string())),
        ]
    )
    rows = [
        {"s": {"a": "abc   ", "n": 1}, "arr": ["x", None, "yz  "], "m": [("k", "v   ")]},
        {"s": None, "arr": None, "m": None},
        {"s": {"a": None, "n": 3}, "arr": [], "m": [("key  long", "ab")]},
    ]
    write_table(root, pa.Table.from_pylist(rows, arrow).slice(0), mode="append")
    for bad in (
        {"s": {"a": "abcd", "n": 9}, "arr": None, "m": None},
        {"s": None, "arr": ["abc"], "m": None},
        {"s": None, "arr": None, "m": [("k", "abc")]},
    ):
        with pytest.raises(errors.DeltaWriteError) as e:
            write_table(root, pa.Table.from_pylist([bad], arrow), mode="append")
        assert e.value.error_class == "EXCEED_LIMIT_LENGTH"
    assert DeltaLog.for_table(root).update().version == 1
    want = [
        {"s": {"a": "abc", "n": 1}, "arr": ["x ", None, "yz"], "m": [("k", "v ")]},
        {"s": None, "arr": None, "m": None},
        {"s": {"a": None, "n": 3}, "arr": [], "m": [("key  long", "ab")]},
    ]
    assert oracle_rows(root).to_pylist() == want
