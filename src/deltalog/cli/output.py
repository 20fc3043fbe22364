"""Rendering for the CLI: readable tables for people, JSON for machines."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import pyarrow as pa


def rows_as_actions(table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows of file actions as their log JSON objects (maps as objects, nulls omitted)."""
    return [_clean(row) for row in table.to_pylist()]


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None or k == "partitionValues"}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return dict(value)  # an Arrow map
        return [_clean(x) for x in value]
    return value


def print_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(value, out, indent=2, default=str, ensure_ascii=False)
    out.write("\n")


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    out: TextIO | None = None,
    max_width: int = 60,
) -> None:
    """A plain aligned text table."""
    out = out or sys.stdout
    cells = [[_cell(v, max_width) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def print_mapping(items: Sequence[tuple[str, Any]], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    width = max((len(k) for k, _ in items), default=0)
    for k, v in items:
        out.write(f"{k.ljust(width)}  {_cell(v, 200)}\n")


def format_ms(ms: int | None) -> str:
    if ms is None:
        return ""
    return (
        dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    )


def _cell(v: Any, max_width: int) -> str:
    if v is None:
        s = ""
    elif isinstance(v, dict | list):
        s = json.dumps(v, default=str, separators=(",", ":"))
    else:
        s = str(v)
    return s if len(s) <= max_width else s[: max_width - 1] + "…"
