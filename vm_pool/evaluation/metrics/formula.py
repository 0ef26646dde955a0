"""A small, bounded Excel formula evaluator for conditional-formatting rules.

OSWorld computes a conditional-formatting rule's formula with the ``formulas`` package (a
formula compiler on a dispatcher library, with scipy behind it). Conditional formats use a small
part of Excel, so Tandem evaluates that part itself, with Excel's semantics as ``formulas`` has
them, and refuses the rest as a limit ("not scored"), never a guess:

- literals: numbers, ``"text"`` (``""`` is a quote), TRUE, FALSE;
- references: ``A1``, ``$A$1``, ``A1:B9``, whole columns and rows, defined names; what each
  reference holds is bound by the caller (a cell's value, or a range's values as a list);
- operators, tightest first: unary ``-``/``+``, ``%``, ``^``, ``*`` ``/``, ``+`` ``-``, ``&``,
  ``=`` ``<>`` ``<`` ``<=`` ``>`` ``>=`` (numbers < text < booleans; text compared without case);
- functions: see ``formula_functions.FUNCTIONS``.

Errors (``#VALUE!``, ``#DIV/0!``, ``#NUM!``) are values that propagate, as in Excel. Bounds: a
formula of at most ``MAX_FORMULA_CHARS`` characters (Excel's own limit), nesting at most
``MAX_DEPTH`` deep, and at most ``MAX_STEPS`` values touched per rule.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.metrics.formula_functions import FUNCTIONS
from vm_pool.evaluation.metrics.formula_values import (
    COMPARISONS,
    Value,
    binary,
    to_number,
    truthy,
    unsupported,
)

__all__ = ["Formula", "Value", "parse", "truthy"]

MAX_FORMULA_CHARS = 8192
MAX_DEPTH = 64
MAX_STEPS = 20_000_000


@dataclass
class _Node:
    kind: str  # const, ref, unary, percent, binary, call
    value: Any = None  # the constant, the reference's name, the operator or the function
    args: list["_Node"] = field(default_factory=list)
    refs: frozenset[str] = frozenset()


_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<string>"(?:[^"]|"")*")
    | (?P<func>[A-Za-z_][A-Za-z0-9_.]*(?=\())
    | (?P<ref>\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?(?![A-Za-z0-9_.!]))
    | (?P<columns>\$?[A-Za-z]{1,3}:\$?[A-Za-z]{1,3}(?![A-Za-z0-9_.!]))
    | (?P<rows>\$?\d+:\$?\d+(?![A-Za-z0-9_.!]))
    | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_.]*(?![A-Za-z0-9_.!]))
    | (?P<op><=|>=|<>|[-+*/^&=<>%(),])
    """,
    re.VERBOSE,
)
_BINARY_POWER = {**dict.fromkeys(COMPARISONS, 1), "&": 2, "+": 3, "-": 3, "*": 4, "/": 4, "^": 5}
_PERCENT_POWER = 6
_UNARY_POWER = 7


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None or found.lastgroup is None:
            raise unsupported(f"formula {text!r} at {text[position : position + 10]!r}")
        if found.lastgroup != "space":
            tokens.append((found.lastgroup, found.group()))
        position = found.end()
    return tokens


@dataclass
class _Parser:
    tokens: list[tuple[str, str]]
    position: int = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, text: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (text is not None and token[1] != text):
            raise unsupported(f"formula expecting {text or 'more'}")
        self.position += 1
        return token

    def expression(self, min_power: int = 0, depth: int = 0) -> _Node:
        if depth > MAX_DEPTH:
            raise LimitHit("formula", f"formula nests deeper than {MAX_DEPTH}")
        node = self.operand(depth)
        while (token := self.peek()) is not None and token[0] == "op":
            if token[1] == "%" and min_power < _PERCENT_POWER:
                self.take()
                node = _Node("percent", None, [node], node.refs)
                continue
            power = _BINARY_POWER.get(token[1])
            if power is None or power <= min_power:
                break
            self.take()
            right = self.expression(power, depth + 1)  # left-associative, as Excel's ^ too
            node = _Node("binary", token[1], [node, right], node.refs | right.refs)
        return node

    def operand(self, depth: int) -> _Node:
        kind, text = self.take()
        if kind == "op" and text in {"-", "+"}:
            inner = self.expression(_UNARY_POWER, depth + 1)
            return _Node("unary", text, [inner], inner.refs)
        if kind == "op" and text == "(":
            inner = self.expression(0, depth + 1)
            self.take(")")
            return inner
        if kind == "number":
            return _Node("const", float(text))
        if kind == "string":
            return _Node("const", text[1:-1].replace('""', '"'))
        if kind == "name" and text.upper() in {"TRUE", "FALSE"}:
            return _Node("const", text.upper() == "TRUE")
        if kind in {"ref", "columns", "rows", "name"}:
            name = text.replace("$", "").upper()  # the input's name as ``formulas`` gives it
            return _Node("ref", name, refs=frozenset({name}))
        if kind == "func":
            return self.call(text.upper(), depth)
        raise unsupported(f"formula token {text!r}")

    def call(self, name: str, depth: int) -> _Node:
        if name not in FUNCTIONS:
            raise unsupported(f"function {name}")
        self.take("(")
        args: list[_Node] = []
        if (token := self.peek()) is not None and token[1] == ")":
            self.take()
        else:
            while True:
                args.append(self.expression(0, depth + 1))
                if self.take()[1] == ")":
                    break
        refs = frozenset().union(*(arg.refs for arg in args))
        return _Node("call", name, args, refs)


@dataclass
class Formula:
    """A parsed formula; ``inputs`` are its references, sorted, as ``formulas`` orders them."""

    root: _Node
    inputs: list[str]

    def evaluator(self, varying: str, fixed: Mapping[str, Value]) -> Callable[[Value], Value]:
        """The formula as a function of one input (``varying``), the others bound to ``fixed``.

        What reads only ``fixed`` inputs is computed once, however many cells are tested.
        """
        run = _Run(varying, fixed)
        return lambda value: run.value(self.root, value)


def parse(text: str) -> Formula:
    """A formula's syntax tree; LimitHit when it is too long or outside the evaluated subset."""
    if len(text) > MAX_FORMULA_CHARS:
        raise LimitHit("formula", f"a formula of {len(text)} characters")
    parser = _Parser(_tokens(text))
    root = parser.expression()
    if parser.peek() is not None:
        raise unsupported(f"formula {text!r}")
    return Formula(root, sorted(root.refs))


@dataclass
class _Run:
    varying: str
    fixed: Mapping[str, Value]
    cache: dict[int, Value] = field(default_factory=dict)
    steps: int = 0

    def value(self, node: _Node, cell: Value) -> Value:
        if self.varying in node.refs:
            return self.compute(node, cell)
        if id(node) not in self.cache:
            self.cache[id(node)] = self.compute(node, cell)
        return self.cache[id(node)]

    def count(self, steps: int) -> None:
        self.steps += steps
        if self.steps > MAX_STEPS:
            raise LimitHit("formula", f"more than {MAX_STEPS} values computed for one rule")

    def compute(self, node: _Node, cell: Value) -> Value:
        self.count(1)
        if node.kind == "const":
            constant: Value = node.value
            return constant
        if node.kind == "ref":
            bound = cell if node.value == self.varying else self.fixed.get(node.value)
            if isinstance(bound, list):
                self.count(len(bound))
            return bound
        args = [self.value(arg, cell) for arg in node.args]
        if node.kind == "unary":
            number = to_number(args[0])
            return -number if node.value == "-" and isinstance(number, float) else number
        if node.kind == "percent":
            number = to_number(args[0])
            return number / 100 if isinstance(number, float) else number
        if node.kind == "binary":
            return binary(node.value, args[0], args[1])
        result: Value = FUNCTIONS[node.value](args)
        return result
