"""Projected checkpoint reads: which leaf columns of a checkpoint parquet file replay decodes.

A checkpoint holds every action type in one wide schema, and most leaves are null in every
row: no ``remove`` in a checkpoint whose tombstones expired, no ``txn``, no deletion vectors,
no row tracking, an empty ``sidecar`` column in classic checkpoints... Decoding them costs
about as much as decoding the leaves that carry data. A leaf is left out when:

* it is not an action replay asked for (``keys``), or it is ``add.stats_parsed`` (when
  ``add.stats`` is there: the JSON form is the one replay keeps) or
  ``add.partitionValues_parsed``;
* the file's own statistics say it is null in every row of every row group, no list or map is
  on its path (an empty map or list also counts as null in the statistics, and an empty map is
  not a null one), and it is not part of ``add.stats_parsed`` (re-serialized as JSON, which
  names its null fields). A whole action is left out when every such leaf of it is null: a real
  action always has a required field (``path``, ``id``, ``appId``...) that is not.

Left-out leaves come back as nulls: :func:`deltalog.fields.conform_table` fills every field a
file lacks. Files without statistics are read whole.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import pyarrow as pa

# Never decoded: derived forms of fields replay reads in their JSON form.
_DERIVED = ("partitionValues_parsed", "stats_parsed")


def open_parquet(data: bytes | BinaryIO) -> Any:
    """pyarrow's low-level parquet reader over ``data``: bytes, or a seekable file (an object
    store's ranged reader) whose column chunks are fetched when read, nearby ones coalesced into
    one request (``pre_buffer``), so the leaves :func:`projected_leaves` leaves out are never
    downloaded.

    ``pyarrow.parquet`` (the public module) costs ~25 ms to import for wrappers replay does not
    use; its ``ParquetFile`` reads through this same reader.
    """
    ranged = not isinstance(data, bytes | bytearray | memoryview)
    source = pa.PythonFile(data, mode="r") if ranged else pa.BufferReader(data)
    try:
        from pyarrow._parquet import ParquetReader
    except ImportError:  # pragma: no cover - a pyarrow that moved it
        import pyarrow.parquet as pq

        return pq.ParquetFile(source, pre_buffer=ranged).reader
    reader = ParquetReader()
    reader.open(source, pre_buffer=ranged)
    return reader


def projected_leaves(reader: Any, keys: tuple[str, ...]) -> list[int]:
    """The indexes of the leaf columns to decode for the actions ``keys`` (see the module)."""
    schema: pa.Schema = reader.schema_arrow
    paths: list[list[str]] = reader.column_paths
    add = schema.field("add").type if "add" in schema.names else None
    derived = set(_DERIVED)
    if add is not None and pa.types.is_struct(add) and add.get_field_index("stats") < 0:
        derived.discard("stats_parsed")  # the only stats there are: re-serialized by the reader
    metadata = reader.metadata
    wanted: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        top = path[0]
        if top not in keys or top not in schema.names:
            continue
        if top == "add" and len(path) > 1 and path[1] in derived:
            continue
        wanted.setdefault(top, []).append(i)
    out: list[int] = []
    for leaves in wanted.values():
        # stats_parsed (read only to re-serialize as JSON) keeps its null leaves: the JSON
        # names them.
        flat = {
            i
            for i in leaves
            if not _repeated(schema, paths[i]) and paths[i][1:2] != ["stats_parsed"]
        }
        null = {i for i in flat if _null_everywhere(metadata, i)}
        if flat and null == flat:
            continue  # the action is absent from the file
        out += [i for i in leaves if i not in null]
    return sorted(out)


def _repeated(schema: pa.Schema, path: list[str]) -> bool:
    """Whether a list or map is on the leaf's path (its statistics then count empties as
    nulls)."""
    t: pa.DataType = schema.field(path[0]).type
    for name in path[1:]:
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            return True
        if not pa.types.is_struct(t):
            return False
        index = t.get_field_index(name)
        if index < 0:
            return True  # a layout this walk does not know: never left out
        t = t.field(index).type
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)


def _null_everywhere(metadata: Any, column: int) -> bool:
    """Whether the file's statistics say leaf ``column`` is null in every row."""
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        stats = group.column(column).statistics
        if stats is None or not stats.has_null_count or stats.null_count != group.num_rows:
            return False
    return True
