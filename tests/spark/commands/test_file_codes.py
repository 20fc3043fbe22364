"""Rows' files as crc32 codes on the way to the driver (deltalog.spark.commands.file_codes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import deltalog
from deltalog import DeltaLog
from deltalog.spark.commands import file_codes
from deltalog.spark.read.common import FILE, ROW, file_keys
from deltalog.spark.read.scan import scan_dataframe


def test_codes_are_sparks_crc32(spark: Any) -> None:
    from pyspark.sql import functions as F

    keys = ["file:/t/a.parquet", "file:/t/p=%20x/b%C3%A9.parquet", "file:/t/日本/c.parquet", ""]
    theirs = spark.createDataFrame([(k,) for k in keys], "k string").select(F.crc32("k"))
    ours = file_codes.codes(keys)
    assert ours is not None
    assert ours.to_pylist() == [r[0] for r in theirs.collect()]
    assert file_codes.codes(["file:/x", "file:/x"]) is None  # two files, one code


def test_rows_and_row_indexes_by_code_and_by_path(spark: Any, tmp_path: Path) -> None:
    """The same rows whether the files are told apart by code or, when codes collide, by
    their paths; expected rows from the input (id = 10 * row index + file)."""
    deltalog.register(spark)
    path = tmp_path / "t é"
    for part in range(3):
        ids = [10 * i + part for i in range(50)]
        spark.createDataFrame([(i,) for i in ids], "id long").coalesce(1).write.format(
            "delta"
        ).mode("append").save(str(path))
    snapshot = DeltaLog.for_table(str(path)).update()
    files = snapshot.all_files_arrow()
    keys = file_keys(snapshot, files)
    df = scan_dataframe(spark, snapshot, DeltaLog.for_table(str(path)).store, files, row_ids=True)
    picked = df.where("id % 3 = 0")
    by_code = file_codes.collect_rows(picked, keys, [ROW, "id"])
    by_path = file_codes._grouped_rows(picked, [ROW, "id"])
    assert _triples(by_code) == _triples(by_path)
    # id = 10 * row + file number, so each file's rows are known from the input
    file_of = {
        key: by_code.filter(pc.equal(by_code[FILE], key))["id"][0].as_py() % 10 for key in keys
    }
    expected = {key: [i for i in range(50) if (10 * i + n) % 3 == 0] for key, n in file_of.items()}
    assert sorted(_triples(by_code)) == sorted(
        (key, row, 10 * row + file_of[key]) for key, rows in expected.items() for row in rows
    )
    indexes = file_codes.row_indexes(picked, keys)
    grouped = file_codes._grouped_row_indexes(picked)
    assert {k: v.tolist() for k, v in indexes.items()} == expected
    assert {k: v.tolist() for k, v in grouped.items()} == expected
    assert file_codes.row_indexes(df.where("id < 0"), keys) == {}


def _triples(rows: pa.Table) -> list[tuple[str, int, int]]:
    return sorted(
        zip(rows[FILE].to_pylist(), rows[ROW].to_pylist(), rows["id"].to_pylist(), strict=True)
    )
