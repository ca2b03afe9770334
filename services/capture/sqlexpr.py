"""The SQL boolean expressions of TiCDC's event filters (``ignore-insert-value-expr`` ...),
compiled once and evaluated on a row's values.

Grammar (MySQL's meaning, SQL's three-valued logic: a NULL operand makes a comparison
unknown, and a row is ignored only when the expression is true):

    expr    := or ;  or := and (OR and)* ;  and := not (AND not)* ;  not := NOT not | test
    test    := sum [ (= | != | <> | < | <= | > | >=) sum | IS [NOT] NULL
                   | [NOT] IN ( sum {, sum} ) | [NOT] BETWEEN sum AND sum | [NOT] LIKE sum ]
    sum     := term ((+ | -) term)* ;  term := unary ((* | /) unary)* ;  unary := [-] atom
    atom    := number | 'string' | "string" | NULL | TRUE | FALSE | column | `column` | ( expr )

A number compares with a string by converting the string (MySQL does); other types compare as
they are. Anything outside the grammar (functions, subqueries) is refused at compile time with
the position; a column the row does not have is an error when evaluated. Parentheses, ``NOT``
and unary minus nest at most ``MAX_NESTING`` deep (each level is a recursion of the parser and of
the evaluation); a chain of the same operator (``a or b or c``, ``1 + 2 - 3``) is one flat node,
evaluated in a loop, so its length costs no depth.

Example: ``price > 1000 and state in ('new', 'paid')`` on ``{"price": Decimal("1500"),
"state": "new"}`` -> True; on ``{"price": None, ...}`` -> unknown (None): the row is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from services.capture.errors import BadRequest

Value = Any  # a row value (tributary.change.SqlValue) or a bool
Expr = Callable[[Mapping[str, Value]], Value]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|'(?P<sq>(?:[^'\\]|\\.|'')*)'|\"(?P<dq>(?:[^\"\\]|\\.)*)\""
    r"|`(?P<bq>[^`]+)`|(?P<op><=|>=|!=|<>|[=<>()+\-*/,])|(?P<word>[A-Za-z_][A-Za-z0-9_$]*))"
)
_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "LIKE", "TRUE", "FALSE"}


MAX_NESTING = 64  # parenthesised/NOT/minus levels; Python's stack, not MySQL's, is the bound


class ColumnMissing(LookupError):
    pass


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise BadRequest(
                f"cannot read the expression {text!r} at {pos}: {text[pos : pos + 10]!r}"
            )
        pos = m.end()
        if m.group("num") is not None:
            out.append(("val", Decimal(m.group("num"))))
        elif m.group("sq") is not None:
            out.append(("val", re.sub(r"\\(.)|''", lambda x: x.group(1) or "'", m.group("sq"))))
        elif m.group("dq") is not None:
            out.append(("val", re.sub(r"\\(.)", r"\1", m.group("dq"))))
        elif m.group("bq") is not None:
            out.append(("col", m.group("bq")))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            word = m.group("word")
            upper = word.upper()
            out.append(("kw", upper) if upper in _KEYWORDS else ("col", word))
    return out


def _num(v: Value) -> Value:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float, Decimal)):
        return Decimal(str(v)) if isinstance(v, float) else Decimal(v)
    return v


def _pair(a: Value, b: Value) -> tuple[Value, Value]:
    a, b = _num(a), _num(b)
    if isinstance(a, Decimal) and isinstance(b, (str, bytes)):
        b = _to_decimal(b)
    elif isinstance(b, Decimal) and isinstance(a, (str, bytes)):
        a = _to_decimal(a)
    return a, b


def _to_decimal(v: str | bytes) -> Decimal:
    text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    m = re.match(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", text)
    try:
        return Decimal(m.group(0)) if m else Decimal(0)
    except InvalidOperation:
        return Decimal(0)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _cmp(op: str, a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    x, y = _pair(a, b)
    try:
        return _COMPARE[op](x, y)
    except TypeError:
        return _COMPARE[op](str(x), str(y))


def _like(value: Value, pattern: Value) -> Value:
    if value is None or pattern is None:
        return None
    regex = "".join(
        ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in str(pattern)
    )
    return re.fullmatch(regex, str(value), re.IGNORECASE | re.DOTALL) is not None


def _and(a: Value, b: Value) -> Value:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: Value, b: Value) -> Value:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _truth(v: Value) -> Value:
    if v is None or isinstance(v, bool):
        return v
    return _num(v) != 0 if isinstance(_num(v), Decimal) else _to_decimal(v) != 0


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.nesting = 0

    def nested(self, parse: Callable[[], Expr]) -> Expr:
        """``parse()`` one level deeper, refused past ``MAX_NESTING``."""
        if self.nesting >= MAX_NESTING:
            raise self.fail(f"nested more than {MAX_NESTING} deep")
        self.nesting += 1
        try:
            return parse()
        finally:
            self.nesting -= 1

    def fail(self, why: str) -> BadRequest:
        return BadRequest(f"expression {self.text!r}: {why} (token {self.i + 1})")

    def peek(self, kind: str, value: str | None = None) -> bool:
        if self.i >= len(self.toks):
            return False
        k, v = self.toks[self.i]
        return k == kind and (value is None or v == value)

    def take(self, kind: str, value: str | None = None) -> bool:
        if self.peek(kind, value):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, value: str) -> None:
        if not self.take(kind, value):
            raise self.fail(f"expected {value}")

    def parse(self) -> Expr:
        if not self.toks:
            raise BadRequest("an empty expression")
        e = self.or_()
        if self.i != len(self.toks):
            raise self.fail("unexpected text (functions and subqueries are not supported)")
        return e

    def or_(self) -> Expr:
        items = [self.and_()]
        while self.take("kw", "OR"):
            items.append(self.and_())
        return _logic(_or, items)

    def and_(self) -> Expr:
        items = [self.not_()]
        while self.take("kw", "AND"):
            items.append(self.not_())
        return _logic(_and, items)

    def not_(self) -> Expr:
        if self.take("kw", "NOT"):
            inner = self.nested(self.not_)
            return lambda r: None if (v := _truth(inner(r))) is None else not v
        return self.test()

    def test(self) -> Expr:
        left = self.sum()
        if self.i < len(self.toks) and self.toks[self.i][0] == "op":
            op = self.toks[self.i][1]
            if op in _COMPARE:
                self.i += 1
                right = self.sum()
                return lambda r: _cmp(op, left(r), right(r))
        if self.take("kw", "IS"):
            negate = self.take("kw", "NOT")
            self.expect("kw", "NULL")
            return lambda r: (left(r) is None) != negate
        negate = self.take("kw", "NOT")
        if self.take("kw", "IN"):
            self.expect("op", "(")
            items = [self.sum()]
            while self.take("op", ","):
                items.append(self.sum())
            self.expect("op", ")")
            return lambda r: _not(_in(left(r), [i(r) for i in items]), negate)
        if self.take("kw", "BETWEEN"):
            low = self.sum()
            self.expect("kw", "AND")
            high = self.sum()
            return lambda r: _not(
                _and(_cmp(">=", left(r), low(r)), _cmp("<=", left(r), high(r))), negate
            )
        if self.take("kw", "LIKE"):
            pattern = self.sum()
            return lambda r: _not(_like(left(r), pattern(r)), negate)
        if negate:
            raise self.fail("NOT must be followed by IN, BETWEEN or LIKE here")
        return left

    def sum(self) -> Expr:
        first, rest = self.term(), []
        while self.peek("op", "+") or self.peek("op", "-"):
            op = self.toks[self.i][1]
            self.i += 1
            rest.append((op, self.term()))
        return _arithmetic(first, rest)

    def term(self) -> Expr:
        first, rest = self.unary(), []
        while self.peek("op", "*") or self.peek("op", "/"):
            op = self.toks[self.i][1]
            self.i += 1
            rest.append((op, self.unary()))
        return _arithmetic(first, rest)

    def unary(self) -> Expr:
        if self.take("op", "-"):
            inner = self.nested(self.unary)
            return lambda r: _arith("-", Decimal(0), inner(r))
        return self.atom()

    def atom(self) -> Expr:
        if self.i >= len(self.toks):
            raise self.fail("the expression ends too early")
        kind, value = self.toks[self.i]
        self.i += 1
        if kind == "val":
            return lambda r: value
        if kind == "kw" and value in ("NULL", "TRUE", "FALSE"):
            constant = {"NULL": None, "TRUE": True, "FALSE": False}[value]
            return lambda r: constant
        if kind == "col":
            if self.peek("op", "("):
                raise self.fail(f"function {value}() is not supported")
            return lambda r: _column(r, value)
        if kind == "op" and value == "(":
            e = self.nested(self.or_)
            self.expect("op", ")")
            return e
        raise self.fail(f"unexpected {value!r}")


def _logic(fn: Callable[[Value, Value], Value], items: list[Expr]) -> Expr:
    """``a OP b OP c`` as ``(a OP b) OP c``, every operand evaluated (no short cut: a missing
    column is an error wherever it stands)."""
    if len(items) == 1:
        return items[0]

    def run(r: Mapping[str, Value]) -> Value:
        v = _truth(items[0](r))
        for item in items[1:]:
            v = fn(v, _truth(item(r)))
        return v

    return run


def _arithmetic(first: Expr, rest: list[tuple[str, Expr]]) -> Expr:
    """``a + b - c`` as ``(a + b) - c``."""
    if not rest:
        return first

    def run(r: Mapping[str, Value]) -> Value:
        v = first(r)
        for op, item in rest:
            v = _arith(op, v, item(r))
        return v

    return run


def _column(row: Mapping[str, Value], name: str) -> Value:
    if name in row:
        return row[name]
    for key in row:  # MySQL column names are case-insensitive
        if key.lower() == name.lower():
            return row[key]
    raise ColumnMissing(name)


def _in(v: Value, items: list[Value]) -> Value:
    if v is None:
        return None
    results = [_cmp("=", v, i) for i in items]
    if True in results:
        return True
    return None if None in results else False


def _not(v: Value, negate: bool) -> Value:
    return v if not negate or v is None else not v


def _arith(op: str, a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    x, y = _num(a), _num(b)
    x = _to_decimal(x) if isinstance(x, (str, bytes)) else x
    y = _to_decimal(y) if isinstance(y, (str, bytes)) else y
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    return None if y == 0 else x / y


def compile_expr(text: str) -> Expr:
    """The expression as a function of a row; BadRequest names what is not understood."""
    return _Parser(text).parse()
