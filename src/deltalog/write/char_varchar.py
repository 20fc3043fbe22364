"""Values written to ``CHAR(n)`` and ``VARCHAR(n)`` columns, as Spark writes them.

Spark keeps such a column as ``string`` with ``__CHAR_VARCHAR_TYPE_STRING`` field metadata, and
its write-side check (``CharVarcharCodegenUtils``) fits each value before it is stored: a value
longer than n characters loses trailing spaces down to n, and fails the write
(``EXCEED_LIMIT_LENGTH``) if it is still longer; a ``CHAR`` value is then padded with spaces to n.
Lengths are in characters (code points), as Spark's ``UTF8String.numChars``. The Python writers
(``write_table``, the local engine's UPDATE and MERGE) fit new values here; Spark's writes do the
same in Spark (``spark/write/batch.py``).

A ``CHAR``/``VARCHAR`` nested in a struct, array or map is declared as Spark declares it: the
top-level column's metadata holds the whole declared type (``struct<a:varchar(3)>``,
``array<char(2)>``), as Spark's ``CharVarcharUtils`` writes it, and nested values are fitted
alike. :func:`parse_declared` reads such a type from SQL text or from that metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.schema import CHAR_VARCHAR_KEY, StructField, StructType
from deltalog.write.conform import list_parts

_Rows = TypeVar("_Rows", pa.Table, pa.RecordBatch)


@dataclass(frozen=True, slots=True)
class Declared:
    """A declared type holding ``CHAR``/``VARCHAR`` somewhere: ``kind`` is ``char`` or
    ``varchar`` (``length`` n), ``struct`` (``children``: its fields, by name), ``array``
    (one child, ``element``), ``map`` (``key`` and ``value``) or ``other`` (any type without
    one)."""

    kind: str
    length: int = 0
    children: tuple[tuple[str, Declared], ...] = ()

    def has_char_varchar(self) -> bool:
        return self.kind in ("char", "varchar") or any(
            c.has_char_varchar() for _, c in self.children
        )


_OTHER = Declared("other")
_TOKEN = re.compile(
    r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[<>(),:]|[^\s<>(),:`'\"]+)"
)


def parse_declared(text: str) -> tuple[Declared, str] | None:
    """The declared type of Spark SQL type text (any case and spacing; struct fields as
    ``name: type`` or ``name type``, with ``NOT NULL`` and ``COMMENT '...'``) and the same text
    with each ``CHAR(n)``/``VARCHAR(n)`` spelled ``string`` (what the column stores), or
    ``None`` when the type declares neither or cannot be read."""
    tokens: list[tuple[str, int, int]] = []
    pos = 0
    while pos < len(text) and text[pos:].strip():
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        tokens.append((m.group(1), m.start(1), m.end(1)))
        pos = m.end()
    spans: list[tuple[int, int]] = []
    try:
        declared, at = _type(tokens, 0, spans)
    except (IndexError, ValueError):
        return None
    if at != len(tokens) or not declared.has_char_varchar():
        return None
    stored = text
    for start, end in reversed(spans):
        stored = stored[:start] + "string" + stored[end:]
    return declared, stored


def _type(tokens: list[tuple[str, int, int]], i: int, spans: list[tuple[int, int]]) -> Any:
    word = tokens[i][0].lower()
    if word in ("char", "character", "varchar") and tokens[i + 1][0] == "(":
        if tokens[i + 3][0] != ")":
            raise ValueError(word)
        spans.append((tokens[i][1], tokens[i + 3][2]))
        return Declared("varchar" if word == "varchar" else "char", int(tokens[i + 2][0])), i + 4
    if word in ("struct", "array", "map") and i + 1 < len(tokens) and tokens[i + 1][0] == "<":
        return _nested(word, tokens, i + 2, spans)
    depth = 0  # any other type: its words and parenthesised arguments (decimal(10, 2))
    while i < len(tokens) and (depth or tokens[i][0] not in (",", ">", ")")):
        depth += {"(": 1, ")": -1}.get(tokens[i][0], 0)
        i += 1
    return _OTHER, i


def _nested(kind: str, tokens: list[tuple[str, int, int]], i: int, spans: list[Any]) -> Any:
    children: list[tuple[str, Declared]] = []
    if kind == "array":
        element, i = _type(tokens, i, spans)
        children.append(("element", element))
    elif kind == "map":
        key, i = _type(tokens, i, spans)
        if tokens[i][0] != ",":
            raise ValueError(kind)
        value, i = _type(tokens, i + 1, spans)
        children += [("key", key), ("value", value)]
    else:
        while tokens[i][0] != ">":
            name = _unquote(tokens[i][0])
            i += 2 if tokens[i + 1][0] == ":" else 1
            field_type, i = _type(tokens, i, spans)
            while tokens[i][0] not in (",", ">"):  # NOT NULL, COMMENT '...'
                i += 1
            children.append((name, field_type))
            i += 1 if tokens[i][0] == "," else 0
    if tokens[i][0] != ">":
        raise ValueError(kind)
    return Declared(kind, 0, tuple(children)), i + 1


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def declared(field: StructField) -> Declared | None:
    """The declared type of ``field`` when its metadata declares a ``CHAR``/``VARCHAR`` in
    it, else ``None``."""
    text = field.metadata.get(CHAR_VARCHAR_KEY)
    parsed = parse_declared(text) if isinstance(text, str) else None
    return parsed[0] if parsed is not None else None


def catalog_string(type_json: Any, declared: Declared) -> str:
    """Spark's ``catalogString`` of a declared type, the text Spark keeps in the
    ``__CHAR_VARCHAR_TYPE_STRING`` metadata: ``type_json`` is the stored type's schema JSON
    (strings where ``declared`` has ``CHAR``/``VARCHAR``)."""
    if declared.kind in ("char", "varchar"):
        return f"{declared.kind}({declared.length})"
    if isinstance(type_json, str):
        return _SIMPLE_NAMES.get(type_json, type_json)
    children = {k.lower(): v for k, v in declared.children}
    kind = type_json["type"]
    if kind == "struct":
        inner = ",".join(
            f"{_quote(f['name'])}:"
            f"{catalog_string(f['type'], children.get(f['name'].lower(), _OTHER))}"
            for f in type_json["fields"]
        )
        return f"struct<{inner}>"
    if kind == "array":
        return f"array<{catalog_string(type_json['elementType'], children.get('element', _OTHER))}>"
    key = catalog_string(type_json["keyType"], children.get("key", _OTHER))
    return f"map<{key},{catalog_string(type_json['valueType'], children.get('value', _OTHER))}>"


_SIMPLE_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def _quote(name: str) -> str:
    return (
        name
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
        else "`" + name.replace("`", "``") + "`"
    )


def fit_char_varchar(data: _Rows, schema: StructType, table: str) -> _Rows:
    """``data`` with each column of ``schema`` declaring ``CHAR``/``VARCHAR`` (matched by
    name, ignoring case) fitted by :func:`fit_values`; the same object when there is none.

    Raises:
        DeltaWriteError: ``EXCEED_LIMIT_LENGTH``.
    """
    positions = {name.lower(): i for i, name in enumerate(data.column_names)}
    for f in schema.fields:
        i = positions.get(f.name.lower())
        if i is None or declared(f) is None:
            continue
        data = data.set_column(i, data.field(i), fit_values(data.column(i), f, table))
    return data


def fit_values(values: Any, field: StructField, table: str) -> Any:
    """``values`` for ``field`` as Spark stores them (unchanged when ``field`` declares no
    ``CHAR(n)``/``VARCHAR(n)``); ``values`` is an array, a chunked array or a scalar.

    Raises:
        DeltaWriteError: ``EXCEED_LIMIT_LENGTH``: a value longer than n once its trailing
            spaces beyond n are dropped.
    """
    tree = declared(field)
    if tree is None:
        return values
    if isinstance(values, pa.Scalar):
        return fit_values(pa.array([values.as_py()], values.type), field, table)[0]
    if isinstance(values, pa.ChunkedArray):
        chunks = [_fit(c, tree, field.name, table) for c in values.chunks]
        return pa.chunked_array(chunks, values.type)
    return _fit(values, tree, field.name, table)


def _fit(values: pa.Array, tree: Declared, column: str, table: str) -> pa.Array:
    if not tree.has_char_varchar():
        return values
    t = values.type
    if tree.kind in ("char", "varchar"):
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return _fit_strings(values, tree, column, table)
        return values
    children = {k.lower(): v for k, v in tree.children}
    mask = values.is_null() if values.null_count else None
    if tree.kind == "struct" and pa.types.is_struct(t):
        # flatten(): the children as the struct's slots see them (a null struct's fields
        # null), so a null struct's hidden values are never checked, as in Spark
        arrays = [
            _fit(child, children.get(t.field(j).name.lower(), _OTHER), column, table)
            for j, child in enumerate(values.flatten())
        ]
        return pa.StructArray.from_arrays(arrays, fields=list(t), mask=mask)
    if tree.kind == "array" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        offsets, child = list_parts(values)
        element = _fit(child, children["element"], column, table)
        return type(values).from_arrays(offsets, element, type=t, mask=mask)
    if tree.kind == "map" and pa.types.is_map(t):
        offsets, entries = list_parts(values)
        keys = _fit(entries.field(0), children["key"], column, table)
        items = _fit(entries.field(1), children["value"], column, table)
        return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=mask)
    return values


def _fit_strings(values: Any, tree: Declared, column: str, table: str) -> Any:
    limit = tree.length
    over = pc.greater(pc.utf8_length(values), limit)
    if pc.any(over).as_py():
        if pc.any(pc.greater(pc.utf8_length(pc.utf8_rtrim(values, characters=" ")), limit)).as_py():
            raise errors.DeltaWriteError(
                "EXCEED_LIMIT_LENGTH",
                f"Exceeds char/varchar type length limitation: {limit}",
                table=table,
                help=f"write values of at most {limit} characters to column {column}.",
            )
        values = pc.if_else(over, pc.utf8_slice_codeunits(values, 0, limit), values)
    if tree.kind == "char":
        values = pc.utf8_rpad(values, width=limit, padding=" ")
    return values
