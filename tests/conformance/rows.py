"""Rows as comparable multisets: both sides to canonical JSON strings, sorted."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from typing import Any

import pyarrow as pa


def oracle_rows(root: str, version: int | None = None) -> pa.Table:
    """All rows deltalake (DataFusion, which applies deletion vectors) reads."""
    import deltalake

    table = deltalake.DeltaTable(root, version=version)
    result = deltalake.QueryBuilder().register("t", table).execute("select * from t")
    return pa.table(result.read_all()) if hasattr(result, "read_all") else pa.table(result)


def canonical(table: pa.Table) -> list[str]:
    """Each row as canonical JSON (columns by name, maps as sorted pairs), sorted."""
    names = sorted(table.column_names)
    rows = table.select(names).to_pylist()
    return sorted(json.dumps([_norm(r[n]) for n in names], sort_keys=True) for r in rows)


def assert_same_rows(got: pa.Table, expected: pa.Table) -> None:
    """Assert ``got`` and ``expected`` hold the same rows (as multisets, as :func:`canonical`
    compares them).

    Tables with the same flat schema (string and binary views counted as their plain types) are
    first compared sorted, in Arrow: equal sorted tables have equal canonical forms, and a
    million rows take a second instead of half a minute. Anything else, or a difference, goes
    through :func:`canonical`, whose comparison decides and shows the diff.
    """
    fast_got, fast_expected = _sorted_flat(got), _sorted_flat(expected)
    if fast_got is not None and fast_expected is not None and fast_got.equals(fast_expected):
        return
    assert canonical(got) == canonical(expected)


_VIEWS = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}


def _sorted_flat(table: pa.Table) -> pa.Table | None:
    """``table`` with columns by name, views as plain types, rows sorted by every column;
    ``None`` when a column is nested (not sortable)."""
    import pyarrow.compute as pc

    names = sorted(table.column_names)
    columns = []
    for name in names:
        column = table.column(name)
        if pa.types.is_nested(column.type) or pa.types.is_dictionary(column.type):
            return None
        columns.append(column.cast(_VIEWS.get(column.type, column.type)))
    flat = pa.table(columns, names=names)
    if not names or flat.num_rows <= 1:
        return flat.combine_chunks()
    order = pc.sort_indices(flat, sort_keys=[(n, "ascending") for n in names])
    return flat.take(order).combine_chunks()


def _norm(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return ["ts", v.isoformat()]
    if isinstance(v, dt.date):
        return ["date", v.isoformat()]
    if isinstance(v, decimal.Decimal):
        return ["dec", format(v.normalize(), "f") if v == v else "NaN"]
    if isinstance(v, float):
        return ["num", "NaN" if math.isnan(v) else repr(float(v))]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return ["num", repr(float(v))] if abs(v) < 2**53 else ["int", str(v)]
    if isinstance(v, bytes | bytearray):
        return ["bin", bytes(v).hex()]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # an Arrow map
            return ["map", sorted((json.dumps(_norm(k)), _norm(x)) for k, x in v)]
        return [_norm(x) for x in v]
    return repr(v)


def duckdb_rows(root: str, version: int | None = None, where: str | None = None) -> pa.Table:
    """The rows DuckDB's delta extension (delta-kernel-rs) reads (all, or those matching the SQL
    condition ``where``, which lets DuckDB skip files by their stats): a second, independent
    reader.

    The extension is loaded from its pip package, never downloaded.
    """
    import os

    import duckdb
    import duckdb_extension_delta

    ext = os.path.join(
        os.path.dirname(duckdb_extension_delta.__file__),
        "extensions",
        f"v{duckdb.__version__}",
        "delta.duckdb_extension",
    )
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        con.execute(f"LOAD '{ext}'")
        escaped = root.replace("'", "''")
        at = "" if version is None else f", version => {int(version)}"
        condition = "" if where is None else f" WHERE {where}"
        result = con.execute(f"SELECT * FROM delta_scan('{escaped}'{at}){condition}").arrow()
        return result.read_all() if hasattr(result, "read_all") else result
    finally:
        con.close()
