"""Tokens of MySQL DDL text, and a cursor to parse them (enough for the DDL sinks translate).

Comments are dropped, TiDB's executable ``/*T! ... */`` ones included (they carry TiDB-only
options such as ``CLUSTERED``). Quoted identifiers and strings come out unescaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<skip>\s+|--[ \t][^\n]*|\#[^\n]*|/\*.*?\*/)
  | (?P<qident>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w$]))
  | (?P<word>[\w$\u0080-\uffff]+)
  | (?P<punct>.)
    """,
    re.X | re.S,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a", "b": "\b"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # qident | string | number | word | punct
    text: str  # unescaped for qident and string; as written otherwise

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


def _unescape_string(body: str, q: str) -> str:
    body = body.replace(q + q, q)
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body, flags=re.S)


def tokenize(sql: str) -> list[Token]:
    out: list[Token] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind == "skip" or kind is None:
            continue
        if kind == "qident":
            text = text[1:-1].replace("``", "`")
        elif kind == "string":
            text = _unescape_string(text[1:-1], text[0])
        out.append(Token(kind, text))
    return out


class Cursor:
    """Walks tokens; ``accept``/``expect`` consume keywords, ``name`` an identifier."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end of statement")
        self.pos += 1
        return tok

    def at_end(self) -> bool:
        tok = self.peek()
        return tok is None or (tok.text == ";" and self.pos == len(self.tokens) - 1)

    def at(self, punct: str) -> bool:
        """Whether the next token is the punctuation ``punct`` (not consumed)."""
        tok = self.peek()
        return tok is not None and tok.kind == "punct" and tok.text == punct

    def accept(self, *words: str) -> bool:
        """Consume the keywords ``words`` in sequence if they come next."""
        for i, w in enumerate(words):
            tok = self.peek(i)
            if tok is None or not (tok.is_word(w) or (tok.kind == "punct" and tok.text == w)):
                return False
        self.pos += len(words)
        return True

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise ValueError(f"expected {' '.join(words)} at {self.peek()}")

    def name(self) -> str:
        tok = self.next()
        if tok.kind not in ("word", "qident"):
            raise ValueError(f"expected a name, got {tok.text!r}")
        return tok.text

    def qualified(self, default_schema: str) -> tuple[str, str]:
        """``[schema.]name``, with ``default_schema`` when unqualified."""
        first = self.name()
        if self.accept("."):
            return first, self.name()
        return default_schema, first

    def skip_group(self) -> list[Token]:
        """Consume a balanced ``( ... )``; the tokens inside."""
        self.expect("(")
        depth = 1
        inside: list[Token] = []
        while True:
            tok = self.next()
            if tok.kind == "punct" and tok.text in "()":
                depth += 1 if tok.text == "(" else -1
                if depth == 0:
                    return inside
            inside.append(tok)
