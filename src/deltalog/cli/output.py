"""Rendering for the CLI: readable tables for people, JSON for machines.

Times are ISO 8601 in UTC with milliseconds (``2024-01-03T10:00:00.123Z``), in text and JSON.
An empty value (``None``, ``{}``, ``[]``) is an empty cell in text.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows of ``table`` as JSON objects: Arrow maps become objects (``{}`` when empty), nulls
    inside structs are left out, top-level nulls are kept (callers drop what they do not show)."""
    import pyarrow as pa  # a table was read, so pyarrow is loaded; --help never gets here

    rows = table.to_pylist()
    maps = [f.name for f in table.schema if pa.types.is_map(f.type)]
    structs = [f.name for f in table.schema if pa.types.is_struct(f.type)]
    for row in rows:
        for name in maps:
            if row[name] is not None:
                row[name] = dict(row[name])
        for name in structs:
            if row[name] is not None:
                row[name] = {k: v for k, v in row[name].items() if v is not None}
    return rows


def rows_as_actions(table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows of file actions as their log JSON objects: maps as objects, null fields left
    out (``partitionValues`` is always there). Used by ``examples/demo.py``."""
    return [
        {k: v for k, v in row.items() if v is not None or k == "partitionValues"}
        for row in arrow_rows(table)
    ]


def format_ms(ms: int | None) -> str:
    """:func:`format_time` with ``""`` for ``None`` (for text). Used by ``examples/demo.py``."""
    return format_time(ms) or ""


def format_time(ms: int | None) -> str | None:
    """``ms`` since the epoch as ISO 8601 UTC with milliseconds; ``None`` stays ``None``."""
    if ms is None:
        return None
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def print_json(value: Any, out: TextIO | None = None) -> None:
    """``value`` as indented JSON; datetimes as ISO 8601 (``Z`` for UTC), other non-JSON
    values (decimals, bytes) as their ``str``."""
    out = out or sys.stdout
    json.dump(value, out, indent=2, default=_plain, ensure_ascii=False)
    out.write("\n")


def _plain(v: Any) -> str:
    if isinstance(v, dt.datetime):
        text = v.isoformat()
        return text.removesuffix("+00:00") + "Z" if v.utcoffset() == dt.timedelta(0) else text
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    out: TextIO | None = None,
    max_width: int = 60,
) -> None:
    """A plain aligned text table; cells longer than ``max_width`` are cut with an ellipsis."""
    out = out or sys.stdout
    cells = [[cell(v, max_width) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def print_mapping(items: Sequence[tuple[str, Any]], out: TextIO | None = None) -> None:
    """``key  value`` lines, keys aligned."""
    out = out or sys.stdout
    width = max((len(k) for k, _ in items), default=0)
    for k, v in items:
        out.write(f"{k.ljust(width)}  {cell(v, 200)}".rstrip() + "\n")


def cell(v: Any, max_width: int) -> str:
    """One value as text: nothing for ``None`` and empty containers, compact JSON for the
    others, ``str`` for scalars."""
    if v is None or (isinstance(v, dict | list | tuple) and not v):
        s = ""
    elif isinstance(v, dict | list | tuple):
        s = json.dumps(v, default=_plain, separators=(",", ":"), ensure_ascii=False)
    else:
        s = _plain(v)
    return s if len(s) <= max_width else s[: max_width - 1] + "…"
