"""The Z-order curve of OPTIMIZE ZORDER BY, engine-free, so that both engines lay a table out
the same way (reference ``MultiDimClustering``, ``ZOrderClustering``, ``range_partition_id``).

* Each Z-order column is cut into range ids by increasing :func:`range_bounds`: every distinct
  non-null value when there are few enough (its id is then its dense rank), otherwise
  quantiles of the values. A value's id is one more than the number of bounds below it; NULL
  is 0, ahead of every value; equal values share an id.
* The ids' bits are interleaved into one non-negative 64-bit Z-value (:func:`z_positions`):
  bit ``i`` of column ``j`` (of ``k``) goes to position ``i * k + (k - 1 - j)``, so the first
  column's bit leads each group.

The pyarrow engine (:mod:`deltalog.commands.optimize.arrow`) computes ids and Z-values here
(:func:`z_order_keys`); the Spark engine takes its bounds from :func:`range_bounds` over its
sample and builds the same ids and Z-value as Spark expressions from :func:`z_positions`, so it
runs no Python in the executors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Range-id bits per column: at most 2**8 - 1 ids (255 bounds). The reference allows up to 1000
# range ids (``spark.databricks.io.skipping.mdc.rangeId.max``, ~10 bits); 8 bits are chosen
# because the Spark engine evaluates each column's id as a binary search of CASE WHENs over
# the bounds, one comparison per bound in the generated code, and 255 keep that inside
# whole-stage code generation while 1023 would not. 256 ids per column already cut a
# partition into 2**16 cells for two columns, far more than the files OPTIMIZE writes in it.
MAX_BITS_PER_COLUMN = 8
# Sampled rows from which the Spark engine takes the bounds (the pyarrow engine reads all
# rows): below this many rows both engines see every value, so their curves are identical.
SAMPLE_ROWS = 100_000


def bits_per_column(num_columns: int) -> int:
    """Range-id bits per column so that the interleaved value fits a non-negative ``long``."""
    return max(1, min(MAX_BITS_PER_COLUMN, 63 // max(1, num_columns)))


def range_bounds(values: pa.Array | pa.ChunkedArray, bits: int) -> list[object]:
    """Increasing bounds that cut ``values`` (NULL and NaN ignored) into at most
    ``2**bits - 1`` ranges: every distinct value when there are at most ``2**bits - 2``,
    otherwise values at equal shares of the sorted values."""
    present = pc.drop_null(values)
    if pa.types.is_floating(present.type):
        present = present.filter(pc.invert(pc.is_nan(present)))
    distinct = pc.unique(present)
    most = (1 << bits) - 2
    if len(distinct) <= most:
        return distinct.take(pc.sort_indices(distinct)).to_pylist()
    ordered = present.take(pc.sort_indices(present)).to_pylist()
    ranges = most + 1
    picks = {ordered[len(ordered) * i // ranges] for i in range(1, ranges)}
    return sorted(picks)


def range_ids(values: pa.Array | pa.ChunkedArray, bounds: Sequence[object]) -> np.ndarray:
    """Each value's range id: 0 for NULL, else one more than the number of ``bounds`` below
    it (NaN, above every bound, gets the last id)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    ids = np.zeros(len(values), dtype=np.uint64)
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    if not valid.any():
        return ids
    present = values.filter(pa.array(valid)).to_numpy(zero_copy_only=False)
    edges = pa.array(list(bounds), values.type).to_numpy(zero_copy_only=False)
    ids[valid] = np.searchsorted(edges, present, side="left").astype(np.uint64) + np.uint64(1)
    return ids


def z_positions(num_columns: int, bits: int) -> list[tuple[int, int, int]]:
    """``(column, bit, position)`` for every bit of every column's range id: where bit ``bit``
    of column ``column`` lands in the Z-value."""
    k = num_columns
    return [(j, i, i * k + (k - 1 - j)) for i in range(bits) for j in range(k)]


def interleave(ids: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The Z-values of rows whose columns' range ids are ``ids`` (see :func:`z_positions`)."""
    z = np.zeros(len(ids[0]) if ids else 0, dtype=np.uint64)
    for j, i, position in z_positions(len(ids), bits):
        z |= ((ids[j] >> np.uint64(i)) & np.uint64(1)) << np.uint64(position)
    return z


def z_order_keys(rows: pa.Table, names: Sequence[str]) -> pa.Array:
    """Each row's Z-value over the columns ``names`` of ``rows`` (bounds from all the rows)."""
    bits = bits_per_column(len(names))
    ids = [range_ids(rows.column(n), range_bounds(rows.column(n), bits)) for n in names]
    return pa.array(interleave(ids, bits))
