"""The rows of a change-feed plan on this process (the CLI, ``deltalog.*`` and the Spark
commands' local engine), read as fast as pyarrow reads many small files.

A busy table's range is mostly small files (one or a few per commit). Read one by one, a file
costs its open and its per-file Python far more than its bytes, so the plan rows that read whole
local files go through one pyarrow dataset scan per kind (data files; change files, which bring
their own ``_change_type``), decoded on pyarrow's threads; each row is then tied back to its
plan row by the scan's file index, and a plan row's deletion vectors select rows by their
position in the file. What one scan cannot read (remote files, column mapping by field id, a
column that does not cast) is read file by file, as a Python data source task reads it
(:func:`~deltalog.change_data_feed.plan.read_change_file`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog.change_data_feed.plan import ONLY_ROWS, ChangePlan, read_change_file, selected_rows
from deltalog.change_data_feed.versions import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    cdc_read_schema,
)
from deltalog.data_files import (
    TableLayout,
    physical_schema,
    read_parquet_files,
    rows_kept,
    to_logical_files,
)
from deltalog.storage import is_remote, store_for

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

_THREADS = 4  # file-by-file reads in flight (pyarrow reads without the GIL)
# Files of a scan are decoded on a pool of threads only when they average at least this many
# bytes: a small file's decoding is too short for its thread to gain from giving up the GIL, and
# on 2 cores the hand-offs made 1,000 files of 6-12 kB twice as slow as one thread reading them
# all (``bench/README.md``); 20 files of 620 kB gained a third from threads.
THREADED_FILE_BYTES = 256 << 10


def read_plan(plan: ChangePlan, store: LogStore | None = None) -> pa.Table:
    """Every change row of ``plan`` on this process (:func:`cdc_read_schema` columns, in no
    particular order); ``store`` reaches the table's deletion vectors (default:
    :func:`store_for` the table).

    Raises:
        InvalidTableError: a file or a deletion vector is missing or malformed.
    """
    layout = TableLayout.of(plan.snapshot)
    reach = store if store is not None else store_for(layout.table_root)
    schema = cdc_read_schema(plan.snapshot.schema).to_arrow()
    files = plan.files
    parts: list[pa.Table] = []
    covered: set[int] = set()  # plan rows (spec_id) read in one scan
    if layout.column_mapping_mode != "id":  # one scan finds columns by name only
        for is_cdc in (False, True):
            group = files.filter(pc.equal(files["is_cdc"], is_cdc))
            local = [not is_remote(p) for p in group["path"].to_pylist()]
            group = group.filter(pa.array(local, pa.bool_()))
            read = _read_group(layout, group, is_cdc, reach) if group.num_rows else None
            if read is not None:
                parts.append(read)
                covered.update(group["spec_id"].to_pylist())
    leftover = [r for r in files.to_pylist() if r["spec_id"] not in covered]
    if leftover:
        with ThreadPoolExecutor(_THREADS, thread_name_prefix="deltalog-cdf") as pool:
            parts += pool.map(lambda spec: read_change_file(layout, spec, reach), leftover)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.cast(schema) for p in parts])


def _read_group(
    layout: TableLayout, group: pa.Table, is_cdc: bool, store: LogStore
) -> pa.Table | None:
    """The change rows of the plan rows ``group`` (all local, all of one kind) from one scan,
    ``None`` where one scan cannot read them."""
    lowered = {c.lower() for c in layout.partition_columns}
    data_fields = [f for f in layout.schema.fields if f.name.lower() not in lowered]
    physical = physical_schema(data_fields, layout.column_mapping_mode)
    if is_cdc:
        physical = physical.append(pa.field(CHANGE_TYPE, pa.string()))
    specs = group.to_pylist()
    threads = decode_on_threads(group["size"])
    read = read_parquet_files([s["path"] for s in specs], physical, threads=threads)
    if read is None:
        return None
    data, file_of_row = read
    keep = _selection(specs, file_of_row, layout.table_root, store)
    if keep is not None:
        data, file_of_row = data.filter(pa.array(keep)), file_of_row[keep]
    table = to_logical_files(
        data,
        layout.schema,
        layout.partition_columns,
        layout.column_mapping_mode,
        [dict(s["partitionValues"] or []) for s in specs],
        file_of_row,
    )
    take = pa.array(file_of_row, pa.int64())
    change = data[CHANGE_TYPE].cast(pa.string()) if is_cdc else group["change_type"].take(take)
    timestamps = pc.multiply(group["timestamp"], 1000).cast(pa.timestamp("us", tz="UTC"))
    return (
        table.append_column(CHANGE_TYPE, change)
        .append_column(COMMIT_VERSION, group["version"].take(take))
        .append_column(COMMIT_TIMESTAMP, timestamps.take(take))
    )


def decode_on_threads(sizes: pa.ChunkedArray | pa.Array) -> bool:
    """Whether files of ``sizes`` (bytes, null where unknown) are decoded on a pool of
    threads: when they average at least :data:`THREADED_FILE_BYTES`."""
    mean = pc.mean(sizes).as_py()
    return mean is None or mean >= THREADED_FILE_BYTES


def _selection(
    specs: list[dict[str, Any]], file_of_row: np.ndarray, table_root: str, store: LogStore
) -> np.ndarray | None:
    """Which rows the plan rows' deletion vectors keep (``None``: every row)."""
    vectors = {i: selected_rows(s, table_root, store) for i, s in enumerate(specs)}
    listed = {
        i: (rows, specs[i]["mode"] == ONLY_ROWS) for i, rows in vectors.items() if rows is not None
    }
    return rows_kept(file_of_row, len(specs), listed)
