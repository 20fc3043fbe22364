"""DmlJob's reading ahead (``prefetching``): what a read takes, and that nothing outlives it."""

from __future__ import annotations

import threading
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq

from deltalog.commands.dml.job import DmlJob
from deltalog.txn import operations


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    for start in (0, 10):  # two files
        ids = list(range(start, start + 10))
        rows = pa.table({"id": ids, "v": [i * 1.5 for i in ids], "s": [f"s{i}" for i in ids]})
        deltalake.write_deltalake(path, rows, mode="append")
    return path


def test_reads_take_the_rows_read_ahead_for_their_file_and_columns(tmp_path: Path) -> None:
    path = _table(tmp_path)
    job = DmlJob.at(path, operations.delete(["id > 1"]))
    files = job.snapshot.all_files_arrow()
    rows = files.to_pylist()
    with job, job.prefetching(files, ["id"]):
        for row in rows:
            on_disk = pq.read_table(f"{path}/{row['path']}")
            # Read ahead for other columns: this read reads the file itself.
            whole, _ = job.read(row)
            assert sorted(whole.column_names) == ["id", "s", "v"]
            assert whole.column("s").to_pylist() == on_disk.column("s").to_pylist()
            keys, index = job.read(row, ["id"])
            assert keys.column_names == ["id"]
            assert keys.column("id").to_pylist() == on_disk.column("id").to_pylist()
            assert index.tolist() == list(range(on_disk.num_rows))
    assert not [t for t in threading.enumerate() if t.name.startswith("deltalog-prefetch")]


def test_reads_not_taken_are_dropped_and_the_file_read_again(tmp_path: Path) -> None:
    path = _table(tmp_path)
    job = DmlJob.at(path, operations.delete(["id > 1"]))
    files = job.snapshot.all_files_arrow()
    row = files.to_pylist()[0]
    with job:
        with job.prefetching(files):
            pass  # nothing taken
        # The file changed on disk since (it never does in a table: here, to see which rows a
        # read returns): a read after the block reads it again.
        changed = pa.table({"id": [100, 101], "v": [0.0, 0.0], "s": ["x", "y"]})
        pq.write_table(changed, f"{path}/{row['path']}")
        rows, _ = job.read(row)
        assert rows.column("id").to_pylist() == [100, 101]
    assert not [t for t in threading.enumerate() if t.name.startswith("deltalog-prefetch")]
