"""Predicates for file skipping: a small model of the filters Spark users write, and a parser
for the SQL subset that data skipping can use.

The model covers what Delta's data skipping evaluates against partition values and file
statistics: comparisons of a column with a literal, ``IN``, ``IS [NOT] NULL``, ``BETWEEN`` and
``AND`` / ``OR`` / ``NOT`` over them; comparisons of arithmetic on a column (``k % 10 = 0``,
:class:`Computed`) parse for the row evaluator, and skipping treats them as "may match".
Anything else parses to :class:`Opaque`, which skipping
treats as "may match": the exact filter is always applied to the rows afterwards (by Spark), so
a predicate only ever removes files that cannot hold a matching row.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from deltalog.scan.coercion import float32, parse_spark_date, parse_spark_timestamp

T = TypeVar("T")

# Comparison operators, normalised (``==`` → ``=``, ``<>`` → ``!=``), and their mirror images
# for a literal written on the left (``5 < x`` is ``x > 5``).
_NORMAL = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_MIRROR = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant. ``kind`` is one of int, decimal, float, string, bool, null, date, timestamp
    (Spark's timestamp with local time zone: aware, or naive for the session's zone) and
    timestamp_ntz (naive). A float literal (``0.1F``) holds its value rounded to float32, a
    double (``0.1D``, ``1e5``) its value: both compare as Spark widens them to double."""

    value: Any
    kind: str


@dataclass(frozen=True, slots=True)
class Comparison:
    """``column op literal``; ``op`` is one of ``= != < <= > >=``."""

    column: str
    op: str
    literal: Literal


@dataclass(frozen=True, slots=True)
class Arithmetic:
    """``column op operand`` with ``op`` one of ``+ - * %``: a value computed per row (an
    UPDATE's new value, or the left side of a :class:`Computed` comparison)."""

    column: str
    op: str
    operand: Literal


@dataclass(frozen=True, slots=True)
class Computed:
    """``term op literal`` where ``term`` is :class:`Arithmetic` (``k % 10 = 0``). Skipping
    cannot use it (a file may match); the row evaluator computes it as Spark does, or refuses."""

    term: Arithmetic
    op: str
    literal: Literal


@dataclass(frozen=True, slots=True)
class In:
    column: str
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class And:
    left: Predicate
    right: Predicate


@dataclass(frozen=True, slots=True)
class Or:
    left: Predicate
    right: Predicate


@dataclass(frozen=True, slots=True)
class Not:
    child: Predicate


@dataclass(frozen=True, slots=True)
class Opaque:
    """A condition skipping cannot reason about (functions, two columns, ...): may match."""

    text: str = ""


Predicate = Comparison | Computed | In | IsNull | And | Or | Not | Opaque


def negate(p: Predicate) -> Predicate:
    """``NOT p`` with the negation pushed to the leaves (SQL: a NULL operand matches neither)."""
    if isinstance(p, Comparison):
        return Comparison(p.column, _NEGATE[p.op], p.literal)
    if isinstance(p, Computed):
        return Computed(p.term, _NEGATE[p.op], p.literal)
    if isinstance(p, In):
        return In(p.column, p.values, not p.negated)
    if isinstance(p, IsNull):
        return IsNull(p.column, not p.negated)
    if isinstance(p, And):
        return Or(negate(p.left), negate(p.right))
    if isinstance(p, Or):
        return And(negate(p.left), negate(p.right))
    if isinstance(p, Not):
        return push_down_not(p.child)
    return p


def push_down_not(p: Predicate) -> Predicate:
    """``p`` without :class:`Not` nodes."""
    if isinstance(p, Not):
        return negate(p.child)
    if isinstance(p, And):
        return And(push_down_not(p.left), push_down_not(p.right))
    if isinstance(p, Or):
        return Or(push_down_not(p.left), push_down_not(p.right))
    return p


def has_opaque(p: Predicate) -> bool:
    """Whether any part of ``p`` is :class:`Opaque` (text this module cannot evaluate)."""
    if isinstance(p, Opaque):
        return True
    if isinstance(p, And | Or):
        return has_opaque(p.left) or has_opaque(p.right)
    if isinstance(p, Not):
        return has_opaque(p.child)
    return False


def columns(p: Predicate) -> set[str]:
    """The column names ``p`` refers to."""
    if isinstance(p, (Comparison, In, IsNull)):
        return {p.column}
    if isinstance(p, Computed):
        return {p.term.column}
    if isinstance(p, (And, Or)):
        return columns(p.left) | columns(p.right)
    if isinstance(p, Not):
        return columns(p.child)
    return set()


def simple_string(p: Predicate) -> str:
    """``p`` as Spark prints the unresolved expression it parses from the same SQL (Catalyst's
    ``simpleString``: ``('key = a)``), which delta-spark records for OPTIMIZE's partition
    filters. Operators are this module's normal forms (``a <> 1`` prints as ``NOT ('a = 1)``)."""
    if isinstance(p, Comparison):
        text = f"({_attribute(p.column)} {_SYMBOL[p.op]} {_literal_string(p.literal)})"
        return f"NOT {text}" if p.op == "!=" else text
    if isinstance(p, Computed):
        term = f"({_attribute(p.term.column)} {p.term.op} {_literal_string(p.term.operand)})"
        text = f"({term} {_SYMBOL[p.op]} {_literal_string(p.literal)})"
        return f"NOT {text}" if p.op == "!=" else text
    if isinstance(p, In):
        values = ",".join(_literal_string(v) for v in p.values)
        text = f"{_attribute(p.column)} IN ({values})"
        return f"NOT {text}" if p.negated else text
    if isinstance(p, IsNull):
        return f"{'isnotnull' if p.negated else 'isnull'}({_attribute(p.column)})"
    if isinstance(p, And | Or):
        word = "AND" if isinstance(p, And) else "OR"
        return f"({simple_string(p.left)} {word} {simple_string(p.right)})"
    if isinstance(p, Not):
        return f"NOT {simple_string(p.child)}"
    return p.text


_SYMBOL = {"=": "=", "!=": "=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _attribute(column: str) -> str:
    # Catalyst prints an unresolved name's parts bare, backquoted or not.
    return "'" + column.replace("``", "\0").replace("`", "").replace("\0", "`")


def _literal_string(literal: Literal) -> str:
    if literal.kind == "null":
        return "null"
    if literal.kind == "bool":
        return "true" if literal.value else "false"
    if literal.kind in ("timestamp", "timestamp_ntz"):
        # isoformat, not strftime: glibc's %Y does not pad years before 1000.
        text = literal.value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        return text.rstrip("0").rstrip(".")
    return str(literal.value)


# -- parsing ----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^'\\]|\\.|'')*')
      | (?P<quoted>`(?:[^`]|``)+`)
      | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[lLdDfF]?(?:BD|bd)?)
      | (?P<op><=>|==|!=|<>|<=|>=|[=<>(),])
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
      | (?P<minus>-)
      | (?P<arith>[+*%])
    )""",
    re.VERBOSE,
)
_KEYWORDS = {
    *("and", "or", "not", "in", "is", "null", "between", "true", "false", "date", "timestamp")
}


class PredicateSyntaxError(ValueError):
    """The text is outside the subset data skipping understands."""


def parse_predicate(text: str) -> Predicate:
    """Parse a SQL filter such as ``"day >= '2024-01-01' AND id IN (1, 2)"``.

    Column names are plain or dotted identifiers, or back-quoted. Raises
    :class:`PredicateSyntaxError` for text outside the subset (callers then skip nothing).
    """
    return _parse_all(text, _Parser.expression)


def parse_operand(text: str) -> Operand:
    """Parse one operand: a column, a literal, or ``column op literal`` (``v + 1``).

    Raises :class:`PredicateSyntaxError` for anything else.
    """
    return _parse_all(text, _Parser.operand)


def _parse_all(text: str, rule: Callable[[_Parser], T]) -> T:
    """``rule`` over the whole of ``text`` (nothing may follow)."""
    parser = _Parser(_tokens(text))
    result = rule(parser)
    rest = parser.peek()
    if rest is not None:
        raise PredicateSyntaxError(f"unexpected {rest[1]!r}")
    return result


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise PredicateSyntaxError(f"cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self._tokens = tokens
        self._pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _next(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise PredicateSyntaxError("unexpected end of predicate")
        self._pos += 1
        return token

    def _keyword(self, *words: str) -> bool:
        token = self.peek()
        if token and token[0] == "word" and token[1].lower() in words:
            self._pos += 1
            return True
        return False

    def _expect(self, value: str) -> None:
        _, text = self._next()
        if text.lower() != value:
            raise PredicateSyntaxError(f"expected {value!r}, found {text!r}")

    def expression(self) -> Predicate:
        p = self._conjunction()
        while self._keyword("or"):
            p = Or(p, self._conjunction())
        return p

    def _conjunction(self) -> Predicate:
        p = self._negation()
        while self._keyword("and"):
            p = And(p, self._negation())
        return p

    def _negation(self) -> Predicate:
        if self._keyword("not"):
            return Not(self._negation())
        return self._condition()

    def _condition(self) -> Predicate:
        token = self.peek()
        if token == ("op", "("):
            self._next()
            p = self.expression()
            self._expect(")")
            return p
        left = self.operand()
        if self._keyword("is"):
            negated = self._keyword("not")
            self._expect("null")
            return IsNull(left, negated) if isinstance(left, str) else Opaque("IS NULL")
        negated = self._keyword("not")
        if self._keyword("in"):
            return self._in(left, negated)
        if self._keyword("between"):
            low = self.operand()
            self._expect("and")
            high = self.operand()
            p = And(_compare(left, ">=", low), _compare(left, "<=", high))
            return Not(p) if negated else p
        if negated:
            raise PredicateSyntaxError("NOT must be followed by IN or BETWEEN here")
        kind, op = self._next()
        if kind != "op" or (op not in _NORMAL and op != "<=>"):
            raise PredicateSyntaxError(f"expected a comparison, found {op!r}")
        right = self.operand()
        return _null_safe_equal(left, right) if op == "<=>" else _compare(left, _NORMAL[op], right)

    def _in(self, left: Operand, negated: bool) -> Predicate:
        self._expect("(")
        values = [self.operand()]
        while self.peek() == ("op", ","):
            self._next()
            values.append(self.operand())
        self._expect(")")
        if not isinstance(left, str) or not all(isinstance(v, Literal) for v in values):
            return Opaque("IN")
        return In(left, tuple(v for v in values if isinstance(v, Literal)), negated)

    def operand(self) -> Operand:
        """A column, a literal, or ``column op literal`` (one arithmetic operator)."""
        first = self._primary()
        token = self.peek()
        if token is None or token[0] not in ("minus", "arith"):
            return first
        self._next()
        operand = self._primary()
        if not isinstance(first, str) or not isinstance(operand, Literal):
            raise PredicateSyntaxError("arithmetic is read as a column and a literal")
        if self.peek() is not None and self.peek()[0] in ("minus", "arith"):  # type: ignore[index]
            raise PredicateSyntaxError("one arithmetic operator per operand")
        return Arithmetic(first, token[1], operand)

    def _primary(self) -> str | Literal:
        kind, text = self._next()
        if kind == "minus":
            kind, text = self._next()
            if kind != "number":
                raise PredicateSyntaxError("'-' must precede a number")
            text = "-" + text
        if kind == "number":
            return _number(text)
        if kind == "string":
            return Literal(_unquote(text), "string")
        if kind == "quoted":
            return text[1:-1].replace("``", "`")
        if kind == "word":
            lowered = text.lower()
            if lowered in ("true", "false"):
                return Literal(lowered == "true", "bool")
            if lowered == "null":
                return Literal(None, "null")
            following = self.peek()
            if lowered in ("date", "timestamp") and following and following[0] == "string":
                return _typed_literal(lowered, _unquote(self._next()[1]))
            if self.peek() == ("op", "("):
                if lowered == "cast":
                    return self._cast()
                raise PredicateSyntaxError(f"function {text}() is not used for skipping")
            if lowered in _KEYWORDS:
                raise PredicateSyntaxError(f"unexpected keyword {text}")
            return text
        raise PredicateSyntaxError(f"unexpected {text!r}")

    def _cast(self) -> Literal:
        """``CAST(literal AS type)``, as Spark's analysis writes a literal it coerced (the
        SQL of an analysed ``Column`` condition): the literal, of the target type."""
        self._expect("(")
        inner = self._primary()
        self._expect("as")
        _, type_name = self._next()
        arguments: list[int] = []
        if self.peek() == ("op", "("):  # DECIMAL(p, s), VARCHAR(n)
            self._next()
            while (token := self._next()) != ("op", ")"):
                if token[0] == "number" and token[1].isdigit():
                    arguments.append(int(token[1]))
        self._expect(")")
        if not isinstance(inner, Literal):
            raise PredicateSyntaxError("CAST of a column is not used for skipping")
        return _cast_literal(inner, type_name.lower(), tuple(arguments))


_CAST_KINDS = {
    **dict.fromkeys(("tinyint", "byte", "smallint", "short", "int", "integer"), "int"),
    **dict.fromkeys(("bigint", "long"), "int"),
    **dict.fromkeys(("float", "real", "double"), "float"),
    **dict.fromkeys(("decimal", "dec", "numeric"), "decimal"),
    **dict.fromkeys(("string", "varchar"), "string"),
    "boolean": "bool",
    "date": "date",
    **dict.fromkeys(("timestamp", "timestamp_ltz"), "timestamp"),
    "timestamp_ntz": "timestamp_ntz",
}
# Integral cast targets and their bounds: an out-of-range value fails under ANSI and wraps
# without it (``CAST(300 AS TINYINT)`` is 44 in Spark 3.5), so it is not used.
_WIDE = decimal.Context(prec=100)
_INT_BITS = {"tinyint": 8, "byte": 8, "smallint": 16, "short": 16, "int": 32, "integer": 32}


def _cast_literal(literal: Literal, type_name: str, arguments: tuple[int, ...] = ()) -> Literal:
    """``literal`` cast to ``type_name`` where the value is certain (a number widened or
    rounded as Spark does, a date or timestamp from its text); anything else is not used."""
    kind = _CAST_KINDS.get(type_name)
    value = literal.value
    if kind is None or value is None:
        raise PredicateSyntaxError(f"CAST to {type_name} is not used for skipping")
    if kind == "int" and literal.kind == "int":
        bound = 1 << (_INT_BITS.get(type_name, 64) - 1)
        if -bound <= value < bound:
            return literal
    elif kind == "float" and literal.kind in ("int", "float", "decimal"):
        real = float(value)
        return Literal(float32(real) if type_name in ("float", "real") else real, "float")
    elif kind == "decimal" and literal.kind in ("int", "decimal"):
        precision, scale = (list(arguments) + [10, 0][len(arguments) :])[:2]
        number = decimal.Decimal(value)
        exact = number.quantize(decimal.Decimal(1).scaleb(-scale), context=_WIDE)
        if exact == number and len(exact.as_tuple().digits) <= precision:
            return Literal(number, "decimal")
    elif kind == "string" and literal.kind == "string":
        if not arguments or len(value) <= arguments[0]:
            return literal
    elif kind == literal.kind and kind in ("bool", "date", "timestamp"):
        return literal
    elif kind in ("date", "timestamp", "timestamp_ntz") and literal.kind == "string":
        return _typed_literal(kind, value)
    raise PredicateSyntaxError(f"CAST of a {literal.kind} to {type_name} is not used for skipping")


Operand = str | Literal | Arithmetic
"""What a comparison compares: a column (its name), a literal, or arithmetic on a column."""


def _compare(left: Operand, op: str, right: Operand) -> Predicate:
    if isinstance(left, str) and isinstance(right, Literal):
        return Comparison(left, op, right)
    if isinstance(left, Literal) and isinstance(right, str):
        return Comparison(right, _MIRROR[op], left)
    if isinstance(left, Arithmetic) and isinstance(right, Literal):
        return Computed(left, op, right)
    if isinstance(left, Literal) and isinstance(right, Arithmetic):
        return Computed(right, _MIRROR[op], left)
    return Opaque(op)


def _null_safe_equal(left: Operand, right: Operand) -> Predicate:
    """``a <=> b``: ``x <=> NULL`` is ``x IS NULL``; ``x <=> v`` is ``x IS NOT NULL AND x = v``,
    which is never NULL (a NULL ``x`` makes it false), as Spark's ``<=>``, and negates to
    ``x IS NULL OR x != v``."""
    if isinstance(left, Literal):
        left, right = right, left
    if not isinstance(left, str) or not isinstance(right, Literal):
        return Opaque("<=>")
    if right.kind == "null":
        return IsNull(left)
    return And(IsNull(left, negated=True), Comparison(left, "=", right))


def _unquote(text: str) -> str:
    body = text[1:-1].replace("''", "'")
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _number(text: str) -> Literal:
    lowered = text.lower()
    if lowered.endswith("bd"):
        return Literal(decimal.Decimal(text[:-2]), "decimal")
    if lowered[-1] in "df" or "e" in lowered:
        value = float(text.rstrip("dDfF"))
        if value in (float("inf"), float("-inf")):
            raise PredicateSyntaxError(f"{text} does not fit in a double")
        return Literal(float32(value) if lowered[-1] == "f" else value, "float")
    if lowered[-1] == "l":
        return Literal(int(text[:-1]), "int")
    if "." in text:
        return Literal(decimal.Decimal(text), "decimal")
    return Literal(int(text), "int")


def _typed_literal(kind: str, text: str) -> Literal:
    """A ``DATE``/``TIMESTAMP`` literal or a cast of text, in the forms Spark reads the same
    way (:func:`~deltalog.scan.coercion.parse_spark_date`); others are not used."""
    value: dt.date | None
    if kind == "date":
        value = parse_spark_date(text)
    else:
        value = parse_spark_timestamp(text)
        if kind == "timestamp_ntz" and value is not None:
            value = value.replace(tzinfo=None)  # Spark's cast to timestamp_ntz drops an offset
    if value is None:
        raise PredicateSyntaxError(f"not a {kind} Spark reads the same way: {text!r}")
    return Literal(value, kind)
