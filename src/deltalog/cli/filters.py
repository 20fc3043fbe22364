"""``files --where``: a filter is used whole or refused, never silently ignored.

Data skipping keeps every file for a filter it cannot read, which is right under a row filter
(the rows are filtered anyway) but would make ``deltalog files --where`` list every file and
look as if all of them matched. The CLI checks the filter first.
"""

from __future__ import annotations

from deltalog import errors
from deltalog.scan.predicate import (
    And,
    Not,
    Opaque,
    Or,
    Predicate,
    PredicateSyntaxError,
    columns,
    parse_predicate,
)
from deltalog.schema import StructType

SUBSET = (
    "file selection understands a column compared with a literal (= != < <= > >=), IN, "
    "IS [NOT] NULL and BETWEEN, combined with AND, OR, NOT and parentheses"
)


def check_where(where: str, schema: StructType, table: str) -> None:
    """Return when every condition of ``where`` can select files of a table of ``schema``.

    Raises:
        InvalidArgumentError: the text does not parse, a condition is outside the subset file
            selection evaluates (two columns, ``<=>``, functions), or it names a column the
            table does not have (top-level columns; names match ignoring case, as in Spark).
    """
    try:
        predicate = parse_predicate(where)
    except PredicateSyntaxError as e:
        raise errors.invalid_argument(
            f"--where {where!r} cannot be read ({e}); {SUBSET}.", table
        ) from None
    unusable = _opaque(predicate)
    if unusable:
        raise errors.invalid_argument(
            f"--where {where!r} has conditions that cannot select files "
            f"({', '.join(unusable)}); {SUBSET}.",
            table,
        )
    known = {f.name.lower() for f in schema.fields}
    unknown = sorted(c for c in columns(predicate) if c.lower() not in known)
    if unknown:
        raise errors.invalid_argument(
            f"--where {where!r} names {_describe_unknown(unknown, known)}; the table's columns "
            f"are {', '.join(f.name for f in schema.fields)}.",
            table,
        )


def _opaque(p: Predicate) -> list[str]:
    """The operators of the conditions in ``p`` that file selection cannot evaluate."""
    if isinstance(p, And | Or):
        return _opaque(p.left) + _opaque(p.right)
    if isinstance(p, Not):
        return _opaque(p.child)
    if isinstance(p, Opaque):
        if p.text == "<=>":
            return ["the null-safe <=>"]
        operator = p.text or "a comparison"
        return [f"{operator} without a column on one side and a literal on the other"]
    return []


def _describe_unknown(names: list[str], known: set[str]) -> str:
    nested = [n for n in names if "." in n and n.split(".", 1)[0].lower() in known]
    missing = [n for n in names if n not in nested]
    parts = []
    if missing:
        parts.append(f"unknown column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    if nested:
        parts.append(
            f"nested field{'s' if len(nested) > 1 else ''} {', '.join(nested)} "
            "(files are selected by top-level columns only)"
        )
    return " and ".join(parts)
