"""--set, --set-string and --set-json with Helm's grammar and typing, so a line copied between
`helm` and `jaxgen` means the same (Helm's pkg/strvals):

    a.b=1,c=x            several assignments, comma-separated; a.b nests maps
    list={x,y}           a list; list[0]=x and list[0].k=v address items (list[1] pads with null)
    a\\.b=x  v=a\\,b       a backslash takes the next character literally
    --set: true/false/null (any case), and base-10 integers without a leading 0, are typed;
           everything else (010, 1_0, 1.10, 1e3) stays a string
    --set-string: every value is a string; --set-json: every value is JSON (empty: null), and
    --set-json '{"a": {"b": 1}}' (Helm 4) merges one JSON object into the values
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import yaml_text
from .merging import merge
from .errors import UserError, excerpt

MAX_NAME_LEVELS = 30  # Helm's limits: nesting of a name, and a list index
MAX_INDEX = 65536
_INT = re.compile(r"[+-]?[0-9]+")


class _Text:
    """The characters of one argument, read once from left to right."""

    def __init__(self, text: str):
        self.text, self.at = text, 0

    def done(self) -> bool:
        return self.at >= len(self.text)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def until(self, stops: str) -> tuple[str, str]:
        """(the characters before the first unescaped stop, that stop or "" at the end)."""
        out = []
        while self.at < len(self.text):
            char = self.text[self.at]
            self.at += 1
            if char in stops:
                return "".join(out), char
            if char == "\\":
                if self.at >= len(self.text):
                    return "".join(out), ""
                char = self.text[self.at]
                self.at += 1
            out.append(char)
        return "".join(out), ""


def typed(text: str) -> Any:
    """A --set value as Helm types it."""
    lowered = _go_folded(text)
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if text == "0":
        return 0
    # strconv.ParseInt: at most 19 digits and a sign fit in 64 bits (and int() of thousands of digits fails)
    if text and text[0] != "0" and len(text) <= 20 and _INT.fullmatch(text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    return text


# Go's strings.EqualFold folds these non-ASCII letters to ASCII ones (Unicode simple case folding).
_GO_FOLDS_TO_ASCII = str.maketrans({"\u017f": "s", "\u212a": "k"})


def _go_folded(text: str) -> str | None:
    """`text` folded as strings.EqualFold compares it with an ASCII word (falſe is false); None when it
    holds another non-ASCII character, which no ASCII word equals."""
    folded = text.translate(_GO_FOLDS_TO_ASCII)
    return folded.lower() if folded.isascii() else None


class _End(Exception):
    """The argument ended where more was expected. Helm then keeps what was set so far and stops
    without an error; `items` is the list a caller in a list context sets."""

    def __init__(self, items: list | None = None):
        self.items = items


class _Parser:
    def __init__(self, flag: str, text: str, kind: str):
        self.flag, self.arg, self.kind = flag, text, kind
        self.src = _Text(text)

    def error(self, message: str) -> UserError:
        return UserError(f"{self.flag} {excerpt(self.arg)!r}: {message}")

    def parse_into(self, dest: dict) -> None:
        try:
            while True:
                self.key(dest, 0)
        except _End:
            pass

    def key(self, data: dict, level: int) -> None:
        name, stop = self.src.until("=[,.")
        if stop == "":
            if name:
                raise self.error(f"key {excerpt(name)!r} has no value (expected KEY.PATH=VALUE)")
            raise _End()
        if stop == ",":
            raise self.error(f"key {excerpt(name)!r} has no value (cannot end with ,)")
        if stop == "=":
            if self.kind != "json" and self.src.done():
                self.set(data, name, "")
                raise _End()
            self.set(data, name, self.assigned())
        elif stop == ".":
            if level + 1 > MAX_NAME_LEVELS:
                raise self.error(f"a name nested more than {MAX_NAME_LEVELS} levels deep")
            inner = data.get(name, {})
            if not isinstance(inner, dict):
                raise self.error(f"{excerpt(name)!r} is not a map here, so it has no key below it")
            try:
                self.key(inner, level + 1)
            except _End:
                if inner:
                    self.set(data, name, inner)
                raise
            if not inner:
                raise self.error(f"key map {excerpt(name)!r} has no value")
            self.set(data, name, inner)
        else:  # "[": an index into a list
            index = self.index()
            items = data.get(name, [])
            if not isinstance(items, list):
                raise self.error(f"{excerpt(name)!r} is not a list here, so it has no index")
            try:
                items = self.list_item(items, index, level)
            except _End as end:
                self.set(data, name, end.items)
                raise
            self.set(data, name, items)

    def index(self) -> int:
        text, stop = self.src.until("]")
        if stop == "":
            raise _End()
        if not _INT.fullmatch(text):
            raise self.error(f"list index {excerpt(text)!r} is not a number")
        digits = text.lstrip("+-").lstrip("0") or "0"  # int() refuses thousands of digits, zeros too
        if len(digits) > len(str(MAX_INDEX)):
            raise self.error(f"list index {excerpt(text)!r} is out of range")
        return -int(digits) if text.startswith("-") else int(digits)

    def set_index(self, items: list, index: int, value: Any) -> list:
        if index > MAX_INDEX:
            raise self.error(f"list index {index} is above the maximum of {MAX_INDEX}")
        items = items + [None] * (index + 1 - len(items))
        items[index] = value
        return items

    def list_item(self, items: list, index: int, level: int) -> list:
        if index < 0:
            raise self.error(f"negative list index {index}")
        rest, stop = self.src.until("[.=")
        if rest:
            raise self.error(f"unexpected {excerpt(rest)!r} after a list index")
        if stop == "":
            raise _End(items)
        if stop == "=":
            if self.kind != "json" and self.src.done():
                return self.set_index(items, index, "")
            return self.set_index(items, index, self.assigned())
        if stop == "[":
            try:
                inner_index = self.index()
            except _End:
                raise _End(items) from None
            inner = items[index] if index < len(items) and items[index] is not None else []
            if not isinstance(inner, list):
                raise self.error(f"item {index} is not a list here, so it has no index")
            try:
                inner = self.list_item(list(inner), inner_index, level)
            except _End:
                raise _End(items) from None
            return self.set_index(items, index, inner)
        # ".": a map inside the list (an item that is not one is replaced, as Helm does)
        items = list(items)
        if index < len(items) and not isinstance(items[index], dict):
            items[index] = {}
        inner = items[index] if index < len(items) else {}
        try:
            self.key(inner, level)
        except _End:
            raise _End(items) from None
        return self.set_index(items, index, inner)

    def assigned(self) -> Any:
        """The value after `=`, up to the next unescaped comma (or a {list})."""
        if self.kind == "json":
            return self.json_value()
        if self.src.peek() == "{":
            self.src.at += 1
            items = []
            while True:
                raw, stop = self.src.until(",}")
                if stop == "":
                    raise self.error("a list must end with '}'")
                items.append(self.value(raw))
                if stop == "}":
                    if self.src.peek() == ",":
                        self.src.at += 1
                    return items
        raw, _ = self.src.until(",")
        return self.value(raw)

    def value(self, raw: str) -> Any:
        return raw if self.kind == "string" else typed(raw)

    def json_value(self) -> Any:
        text = self.src.text
        at = self.src.at
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text) or text[at] == ",":
            self.src.at = at + 1
            return None
        try:
            decoder = json.JSONDecoder(parse_constant=self._no_constant, parse_int=yaml_text.json_int)
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError) as e:
            raise self.error(f"not JSON: {_json_problem(e)}") from None
        while end < len(text) and text[end].isspace():
            end += 1
        if end < len(text) and text[end] == ",":
            end += 1
        self.src.at = end
        return value

    def _no_constant(self, name: str):
        raise self.error(f"not JSON: {name} is not a JSON number")

    def merge_object(self, dest: dict) -> None:
        """Helm 4's --set-json '{...}': one JSON object, merged into the values as a values file is."""
        try:
            data = json.loads(self.arg, parse_constant=self._no_constant, parse_int=yaml_text.json_int)
        except (ValueError, RecursionError) as e:
            raise self.error(f"not a JSON object: {_json_problem(e)}") from None
        if not isinstance(data, dict):
            raise self.error("not a JSON object")
        merged = merge(dest, data, null_removes=False)
        dest.clear()
        dest.update(merged)

    @staticmethod
    def set(data: dict, name: str, value: Any) -> None:
        if name:  # as in Helm, an empty name sets nothing
            data[name] = value


def _json_problem(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return getattr(error, "msg", None) or "a number too large"


FLAGS = {"set": "--set", "string": "--set-string", "json": "--set-json"}


def parse_into(text: str, dest: dict, kind: str = "set") -> dict:
    """Apply one --set/--set-string/--set-json argument to `dest` (Helm's ParseInto); returns dest."""
    parser = _Parser(FLAGS[kind], text, kind)
    if kind == "json" and text.strip().startswith("{"):
        parser.merge_object(dest)
    else:
        parser.parse_into(dest)
    return dest
