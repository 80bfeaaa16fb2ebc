"""Cross-field rules as data: each rule is a path, a condition, a message and the engine it binds,
written once in Python. jaxgen evaluates them (errors()); `make generate` compiles those of every
engine and of the Kubernetes engine into the chart's templates/_rules.tpl (helm_template()), so the
two renderers refuse the same values with the same words by construction.

A condition is built from a small vocabulary that has a Helm template expression for each word:
values (Int, Text, Present, Items), facts (Fact: files/contract.json; Row: the target's row),
literals, comparisons, and/or/not, membership, integer arithmetic, Go's path.Clean and a few text
tests (Contains, LastPart, Matches). A rule that
needs more (a loop, a regular expression, a helper template) stays hand-written in both places.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import re2

from .paths import go_clean

GENERATED_HEADER = ("{{/* Generated from the rule tables (generator/rules.py, generator/checks.py, "
                    "generator/engines/kubernetes/rules.py) by `make generate`; do not edit. */}}")


class Expr:
    """A word of the vocabulary: its value for jaxgen's variables, and its Helm template expression."""
    integer = False  # an integer in both: Helm reads a number from a file as float64, so `int` it

    def value(self, values: dict):
        raise NotImplementedError

    def helm(self) -> str:
        raise NotImplementedError


def _walk(values: dict, dotted: str):
    node = values
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


@dataclass(frozen=True)
class _Value(Expr):
    path: str

    def value(self, values):
        return _walk(values, self.path)

    def helm(self):
        return "$v." + self.path


class Text(_Value):
    """A string value."""


class Present(_Value):
    """A value that is set (a true, a non-empty text, list or map)."""

    def value(self, values):
        return bool(_walk(values, self.path))


class Int(_Value):
    integer = True

    def value(self, values):
        return int(_walk(values, self.path))

    def helm(self):
        return f"(int $v.{self.path})"


class Items(_Value):
    """A map value ({} when unset): its size (Len) or its sorted keys (Keys)."""

    def value(self, values):
        return _walk(values, self.path) or {}

    def helm(self):
        return f"($v.{self.path} | default dict)"


@dataclass(frozen=True)
class Fact(Expr):
    """A fact of files/contract.json by its name there, and its Python value (helm_template() checks
    the two agree, so the chart reads what jaxgen compares with)."""
    name: str
    fact: object

    @property
    def integer(self):
        return isinstance(self.fact, int)

    def value(self, values):
        return self.fact

    def helm(self):
        return f"(int $contract.{self.name})" if self.integer else f"$contract.{self.name}"


@dataclass(frozen=True)
class Row(Expr):
    """A field of the target's row (generator/targets.py chart_row), None where the row leaves it out."""
    field: str

    def value(self, values):
        from .targets import chart_row  # Kubernetes targets only: their rules alone read a row
        return chart_row(values["target"]).get(self.field)

    def helm(self):
        return f'(include "jax-training.target" . | fromJson).{self.field}'


@dataclass(frozen=True)
class Lit(Expr):
    literal: object

    @property
    def integer(self):
        return isinstance(self.literal, int) and not isinstance(self.literal, bool)

    def value(self, values):
        return self.literal

    def helm(self):
        return json.dumps(self.literal)


def _lifted(operand) -> Expr:
    if isinstance(operand, Expr):
        return operand
    if isinstance(operand, (str, int)):
        return Lit(operand)
    raise TypeError(f"not a word of the rule vocabulary: {operand!r}")


@dataclass(frozen=True, init=False)
class _Op(Expr):
    operands: tuple

    def __init__(self, *operands):
        object.__setattr__(self, "operands", tuple(_lifted(o) for o in operands))

    def _values(self, values):
        return [o.value(values) for o in self.operands]

    def helm(self):
        return f"({self.go} {' '.join(o.helm() for o in self.operands)})"


def _op(name: str, go: str, python: Callable, integer: bool) -> type:
    return type(name, (_Op,), {"go": go, "integer": integer, "__doc__": f"Go's `{go}`.",
                               "value": lambda self, values: python(*self._values(values))})


Eq = _op("Eq", "eq", lambda a, b: a == b, False)
Ne = _op("Ne", "ne", lambda a, b: a != b, False)
Lt = _op("Lt", "lt", lambda a, b: a < b, False)
Gt = _op("Gt", "gt", lambda a, b: a > b, False)
Add = _op("Add", "add", lambda a, b: a + b, True)
Sub = _op("Sub", "sub", lambda a, b: a - b, True)
Mul = _op("Mul", "mul", lambda a, b: a * b, True)
Div = _op("Div", "div", lambda a, b: a // b, True)  # positive operands only: Go truncates, Python floors
Mod = _op("Mod", "mod", lambda a, b: a % b, True)
And = _op("And", "and", lambda *xs: all(xs), False)
Or = _op("Or", "or", lambda *xs: any(xs), False)
Not = _op("Not", "not", lambda x: not x, False)
In = _op("In", "has", lambda item, items: item in items, False)  # Sprig's `has ITEM LIST`
Clean = _op("Clean", "clean", go_clean, False)
Len = _op("Len", "len", len, True)


class Default(_Op):
    """The first operand, or the second where the first is unset (Sprig's `default SECOND FIRST`)."""
    integer = True

    def value(self, values):
        first, second = self._values(values)
        return int(first or second)

    def helm(self):
        first, second = self.operands
        return f"(int (default {second.helm()} {first.helm()}))"


def _text_op(name: str, doc: str, go: str, python: Callable) -> type:
    """A word over a text and one more operand; Go's form is a format of {text} and {other}, as Sprig
    takes the other (a part, a separator, a pattern) first."""
    return type(name, (_Op,), {"__doc__": doc, "value": lambda self, values: python(*self._values(values)),
                               "helm": lambda self: go.format(text=self.operands[0].helm(),
                                                              other=self.operands[1].helm())})


Contains = _text_op("Contains", "Whether a text holds a part.", "(contains {other} {text})",
                    lambda text, part: part in text)
LastPart = _text_op("LastPart", "A text's part after its last separator (the whole text without one).",
                    "(splitList {other} {text} | last)", lambda text, separator: text.rsplit(separator, 1)[-1])
Matches = _text_op("Matches", "Whether a pattern matches in a text, as Go's regexp (RE2) finds it.",
                   "(regexMatch {other} {text})", lambda text, pattern: re2.search(pattern, text) is not None)


class Keys(_Op):
    """A map's keys, sorted, joined with ", "."""

    def value(self, values):
        return ", ".join(sorted(self._values(values)[0]))

    def helm(self):
        return f'(keys {self.operands[0].helm()} | sortAlpha | join ", ")'


@dataclass(frozen=True)
class Rule:
    """One rule: when `when` holds, the error "PATH: MESSAGE" with MESSAGE a printf format (%d, %s) of
    `args`. engine: None for every target, else the engine whose targets it binds. example: variables
    (over the defaults) that break it, the rule's own planted violation (tests/generator/test_rules.py)."""
    path: str
    when: Expr
    message: str
    args: tuple = ()
    engine: str | None = None
    example: dict | None = None

    def error(self, values: dict) -> str | None:
        if not self.when.value(values):
            return None
        return f"{self.path}: " + self.message % tuple(_lifted(a).value(values) for a in self.args)

    def helm(self) -> str:
        args = "".join(" " + _lifted(a).helm() for a in self.args)
        return (f"{{{{- if {self.when.helm()} }}}}\n"
                f"{{{{- $errors = append $errors (printf {json.dumps(self.path + ': ' + self.message)}{args}) -}}}}\n"
                "{{- end -}}")

    def facts(self):
        """The Fact words of this rule."""
        found, todo = [], [self.when, *map(_lifted, self.args)]
        while todo:
            word = todo.pop()
            found += [word] if isinstance(word, Fact) else []
            todo += list(getattr(word, "operands", ()))
        return found


def errors(rules, values: dict) -> list[str]:
    """The errors of the rules that hold for these (schema-valid) variables, in table order."""
    return [error for rule in rules if (error := rule.error(values)) is not None]


def helm_template(rules, contract: dict) -> str:
    """templates/_rules.tpl: the template jax-training.rules, a JSON list of the errors of the rules of
    every engine and of Kubernetes (only on a Kubernetes target); other engines' rules are left out.
    contract: files/contract.json, which each Fact must match."""
    for fact in (fact for rule in rules for fact in rule.facts()):
        if contract.get(fact.name) != fact.fact:
            raise ValueError(f"rule fact {fact.name}: {fact.fact!r} here, {contract.get(fact.name)!r} in contract.json")
    common = [rule.helm() for rule in rules if rule.engine is None]
    kubernetes = [rule.helm() for rule in rules if rule.engine == "kubernetes"]
    return "\n".join([
        GENERATED_HEADER,
        '{{- define "jax-training.rules" -}}',
        "{{- $v := .Values -}}",
        '{{- $contract := .Files.Get "files/contract.json" | fromJson -}}',
        "{{- $errors := list -}}",
        *common,
        '{{- if include "jax-training.kubernetes" . }}',
        *kubernetes,
        "{{- end -}}",
        "{{- toJson $errors -}}",
        "{{- end -}}",
    ]) + "\n"
