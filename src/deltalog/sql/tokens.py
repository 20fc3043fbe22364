"""Reading Delta's statements from sqlglot's tokens: the cursor, the names of tables and the
small productions every statement family shares (lists, properties, time travel, column paths).

sqlglot lexes a statement it does not know as a ``COMMAND`` token and the rest as one string;
the families (:mod:`~deltalog.sql.describe`, :mod:`~deltalog.sql.alter_table`,
:mod:`~deltalog.sql.commands`) read the rest again as tokens with a :class:`TokenReader`, so
quoting, string escapes and comments follow Spark's lexer, never a regular expression.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot.tokens import Token, TokenType

DIALECT = "spark"
# sqlglot warns on every statement it hands back as a Command; those are read here.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table in a statement: ``delta.`/path``` or a bare string path (``path``), or a name
    of one to three parts (``name``: ``("db", "t")``)."""

    path: str | None = None
    name: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"delta.`{self.path}`" if self.path is not None else ".".join(self.name)


class SqlSyntaxError(ValueError):
    """A Delta statement (recognised by its leading words) that does not follow Delta's
    grammar; the message says where."""


def word(token: Token) -> str:
    """The token's text upper-cased, as a keyword ("" for a string or quoted identifier)."""
    return token.text.upper() if token.token_type not in _QUOTED else ""


_QUOTED = frozenset({TokenType.STRING, TokenType.IDENTIFIER})

_PUNCTUATION = frozenset(
    {TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA, TokenType.DOT, TokenType.SEMICOLON}
)


class TokenReader:
    """A cursor over sqlglot tokens with the productions Delta's statements share."""

    def __init__(self, text: str, tokens: Sequence[Token], pos: int) -> None:
        self.text = text
        self.tokens = tokens
        self.pos = pos

    def peek(self, ahead: int = 0) -> Token | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def at(self, *words: str) -> int:
        """How many tokens spell ``words`` here (sqlglot lexes some phrases, such as
        ``PARTITIONED BY``, as one token); 0 when they do not."""
        wanted, i = list(words), 0
        while wanted:
            t = self.peek(i)
            if t is None:
                return 0
            spelled = word(t).split()
            if not spelled or spelled != wanted[: len(spelled)]:
                return 0
            del wanted[: len(spelled)]
            i += 1
        return i

    def accept(self, *words: str) -> bool:
        n = self.at(*words)
        self.pos += n
        return n > 0

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.fail(f"expected {' '.join(words)}")

    def done(self) -> bool:
        while self.peek() is not None and self.peek().token_type == TokenType.SEMICOLON:  # type: ignore[union-attr]
            self.pos += 1
        return self.peek() is None

    def end(self) -> None:
        if not self.done():
            self.fail("unexpected input")

    def fail(self, why: str) -> None:
        t = self.peek()
        where = "end of input" if t is None else repr(t.text)
        raise SqlSyntaxError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near {where}: {why}.")

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            self.fail("unexpected end of input")
        self.pos += 1
        return t  # type: ignore[return-value]

    def string(self) -> str:
        t = self.next()
        if t.token_type != TokenType.STRING:
            self.pos -= 1
            self.fail("expected a string literal")
        return t.text

    def number(self) -> float:
        t = self.next()
        if t.token_type != TokenType.NUMBER:
            self.pos -= 1
            self.fail("expected a number")
        return float(t.text)

    def identifier(self) -> str:
        t = self.next()
        if t.token_type in (TokenType.STRING, TokenType.NUMBER) or t.token_type in _PUNCTUATION:
            self.pos -= 1
            self.fail("expected an identifier")
        return t.text

    def rest_until(self, *stops: str) -> str:
        """The original text from here up to (not including) the first of ``stops`` at
        parenthesis depth 0, or the end."""
        start = self.peek()
        if start is None:
            self.fail("expected an expression")
        depth, last = 0, start
        while (t := self.peek()) is not None:
            if depth == 0 and (word(t) in stops or t.token_type == TokenType.SEMICOLON):
                break
            if t.token_type == TokenType.L_PAREN:
                depth += 1
            elif t.token_type == TokenType.R_PAREN:
                depth -= 1
            last = t
            self.pos += 1
        return self.text[start.start : last.end + 1]  # type: ignore[union-attr]

    def table(self) -> TableRef:
        """``delta.`path```, a string path, or a (qualified) name."""
        t = self.peek()
        if t is not None and t.token_type == TokenType.STRING:
            return TableRef(path=self.string())
        parts = [self.identifier()]
        quoted = False
        while self.punct(TokenType.DOT):
            quoted = self.peek() is not None and self.peek().token_type == TokenType.IDENTIFIER  # type: ignore[union-attr]
            parts.append(self.identifier())
        if len(parts) == 2 and parts[0].lower() == "delta" and quoted:
            return TableRef(path=parts[1])
        return TableRef(name=tuple(parts))

    def paren_list(self) -> list[str]:
        """``(a, b, ...)`` of identifiers or strings."""
        if not self.punct(TokenType.L_PAREN):
            self.fail("expected (")
        out = [self.next().text]
        while self.punct(TokenType.COMMA):
            out.append(self.next().text)
        if not self.punct(TokenType.R_PAREN):
            self.fail("expected )")
        return out

    def properties(self) -> dict[str, str]:
        """``('k' = 'v', ...)``."""
        if not self.punct(TokenType.L_PAREN):
            self.fail("expected (")
        out: dict[str, str] = {}
        while True:
            key = self.property_key()
            self.punct(TokenType.EQ)
            out[key] = self.next().text
            if not self.punct(TokenType.COMMA):
                break
        if not self.punct(TokenType.R_PAREN):
            self.fail("expected )")
        return out

    def property_key(self) -> str:
        parts = [self.next().text]
        while self.punct(TokenType.DOT):
            parts.append(self.next().text)
        return ".".join(parts)

    def punct(self, kind: TokenType) -> bool:
        t = self.peek()
        if t is not None and t.token_type == kind:
            self.pos += 1
            return True
        return False

    def time_travel(self) -> tuple[int | None, str | None]:
        if self.accept("VERSION", "AS", "OF"):
            return int(self.number()), None
        if self.accept("TIMESTAMP", "AS", "OF"):
            return None, self.rest_until("TBLPROPERTIES", "LOCATION").strip("'\"")
        return None, None

    def column_path(self) -> tuple[str, ...]:
        parts = [self.identifier()]
        while self.punct(TokenType.DOT):
            parts.append(self.identifier())
        return tuple(parts)

    def column_paths(self) -> list[tuple[str, ...]]:
        """``(a, b.c)`` or ``a, b.c``."""
        paren = self.punct(TokenType.L_PAREN)
        out = [self.column_path()]
        while self.punct(TokenType.COMMA):
            out.append(self.column_path())
        if paren and not self.punct(TokenType.R_PAREN):
            self.fail("expected )")
        return out

    def properties_keys(self) -> list[str]:
        if not self.punct(TokenType.L_PAREN):
            self.fail("expected (")
        keys = [self.property_key()]
        while self.punct(TokenType.COMMA):
            keys.append(self.property_key())
        if not self.punct(TokenType.R_PAREN):
            self.fail("expected )")
        return keys
