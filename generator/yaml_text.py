"""YAML in and out, written so that every YAML 1.1 and 1.2 reader decodes the same data.

Kubernetes, kubectl and Helm read YAML with sigs.k8s.io/yaml (go-yaml v2): YAML 1.1 booleans such as
y, n and on, and Go's number syntax (3e-05, 0o17, 1_000, 0x1F). PyYAML reads YAML 1.1 without most of
those, so a string it writes bare can reach the API server as a number or a boolean. Here a string is
written bare only when it cannot be anything but a string to any reader; every other one is quoted.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import codecs
import json
import math
import re
import sys

import yaml

from .errors import excerpt

# Bare only: ASCII, starting with a letter, "/" or a flag's dashes, no indicator anywhere, and a colon
# only inside a word (ghcr.io/org/image:1.0, https://host/path).
_PLAIN = re.compile(r"(?:--?[A-Za-z]|[A-Za-z/])(?:[A-Za-z0-9_./-]|:(?=[A-Za-z0-9_./-]))*")
# Every word some reader takes for a boolean or null (YAML 1.1, YAML 1.2 core, go-yaml), any case.
_RESERVED_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
# What YAML cannot carry raw even inside quotes: non-printable characters, and the characters that
# YAML 1.1 reads as line breaks (NEL, LS, PS) or strips (BOM).
_NOT_RAW = re.compile("[^\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


class _GoResolver(yaml.resolver.BaseResolver):
    """Plain scalars resolved as go-yaml v2 resolves them (through sigs.k8s.io/yaml: Helm's values,
    kubectl): YAML 1.1 booleans including y and n, Go's integer syntax (0x, 0o, 0b, a leading 0 for
    octal, underscores anywhere), no timestamps and no base-60 numbers (both stay strings)."""


_GoResolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"),
    list("yYnNtTfFoO"))
_GoResolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"),
                                  ["~", "n", "N", ""])
_GoResolver.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"), list("-+."))
_GoResolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])
# Anything that starts like a number; _construct_go_number decides as Go does (else a string).
_GoResolver.add_implicit_resolver(_GO_NUMBER := "tag:jax-training,2026:go-number",
                                  re.compile(r"^[-+0-9.][-+0-9a-zA-Z._]*$"), list("-+0123456789."))

_GO_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_GO_INT = {"0x": (16, "0123456789abcdefABCDEF"), "0X": (16, "0123456789abcdefABCDEF"),
           "0o": (8, "01234567"), "0O": (8, "01234567"), "0b": (2, "01"), "0B": (2, "01")}


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else ParseUint(text, 0, 64); None where both fail."""
    sign, body = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
    base, digits = _GO_INT.get(body[:2], (0, ""))
    if base:
        body = body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, digits, body = 8, "01234567", body[1:]
    else:
        base, digits = 10, "0123456789"
    if not body or len(body) > 64 or any(c not in digits for c in body):  # 64 binary digits: no 64-bit number is longer
        return None
    value = int(body, base) * (-1 if sign == "-" else 1)
    if -(2**63) <= value < 2**63 or (sign == "" and value < 2**64):
        return value
    return None


def _construct_go_number(loader, node):
    plain = node.value.replace("_", "")  # go-yaml drops every underscore before it parses a number
    value = _go_int(plain)
    if value is not None:
        return value
    if _GO_FLOAT.match(plain) and math.isfinite(number := float(plain)):  # Go's ParseFloat fails on overflow
        return number
    return node.value


def _construct_go_bool(loader, node):
    return node.value.lower() in ("y", "yes", "true", "on")


_TAG = "tag:yaml.org,2002:"
_CHECKED_TAGS = {_TAG + kind for kind in ("bool", "int", "float", "null", "timestamp")}
_KIND = {bool: "bool", type(None): "null", int: "int", float: "float", str: "str"}
# go-yaml's timestamps: RFC 3339 with one- or two-digit fields (t or T, a zone required), a date and a
# time without a zone, or a date alone.
_GO_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
                           r"(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})| ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?)?")


def _is_go_timestamp(text: str) -> bool:
    match = _GO_TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups()[:3])
    clock = [int(part) for part in match.groups()[3:] if part is not None]
    days = calendar.monthrange(year or 2000, month)[1] if 1 <= month <= 12 else 0  # year 0 is a leap year to Go
    return 1 <= day <= days and all(value < bound for value, bound in zip(clock, (24, 60, 60)))


def _go_bytes_text(data: bytes) -> str:
    """Bytes as Go's JSON writes a string: each byte that is not part of UTF-8 text becomes U+FFFD."""
    return data.decode("utf-8", errors="jax-training-go-replace")


codecs.register_error("jax-training-go-replace", lambda error: ("\ufffd", error.start + 1))


def _construct_any(loader, node):
    """Every node as go-yaml v2 reads it. A collection is a mapping or a list whatever its tag (!!set,
    !!omap, a custom tag); an untagged scalar is typed by the resolver. An explicit tag on a scalar:
    !!str keeps the text, !!binary decodes base64, !!bool/!!int/!!float/!!null/!!timestamp check that
    the text reads as one (an integer may be a float), and any other tag (!foo, !!python/...) is ignored."""
    if isinstance(node, yaml.MappingNode):
        return loader.construct_yaml_map(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_yaml_seq(node)
    if not getattr(node, "explicit", False):
        return _IMPLICIT.get(node.tag, yaml.constructor.SafeConstructor.construct_scalar)(loader, node)
    tag, text = node.tag, node.value
    if tag == _TAG + "binary":
        try:
            return _go_bytes_text(base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True))
        except (binascii.Error, ValueError):
            raise yaml.constructor.ConstructorError(None, None, "!!binary value contains invalid base64 data",
                                                    node.start_mark) from None
    if tag not in _CHECKED_TAGS:
        return text
    if tag == _TAG + "timestamp" and _is_go_timestamp(text):
        return text  # Helm keeps a timestamp's text
    implicit = yaml.ScalarNode(loader.resolve(yaml.ScalarNode, text, (True, False)), text)
    value = _construct_any(loader, implicit)
    kind = _TAG + _KIND[type(value)]
    if kind == tag:
        return value
    if tag == _TAG + "float" and kind == _TAG + "int":
        return float(value)
    raise yaml.constructor.ConstructorError(
        None, None, f"cannot decode {kind.replace(_TAG, '!!')} `{excerpt(text)}` as a {tag.replace(_TAG, '!!')}",
        node.start_mark)




class NonStringKey:
    """A mapping key read as a boolean, number, null or collection; hashed by identity."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


class ExcessiveAliasing(ValueError):
    """A document whose aliases expand it far beyond its text (a "billion laughs")."""


def _aliasing(root: yaml.Node) -> tuple[int, int]:
    """(nodes of the document with every alias expanded, of those the ones inside an alias), counted
    on the composed graph without expanding it: an alias is the anchored node object itself, met again."""
    sizes: dict[int, tuple[int, int]] = {}

    def visit(node: yaml.Node) -> tuple[int, int]:
        total, aliased = 1, 0
        children = node.value if isinstance(node, yaml.SequenceNode) else (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else [])
        for child in children:
            if id(child) in sizes:  # met before: an alias, expanded in full where it is used
                total += sizes[id(child)][0]
                aliased += sizes[id(child)][0]
            else:
                child_total, child_aliased = visit(child)
                total += child_total
                aliased += child_aliased
        sizes[id(node)] = (total, aliased)
        return total, aliased

    return visit(root)


def _allowed_alias_ratio(nodes: int) -> float:
    """go-yaml v2's bound (Helm's "excessive aliasing"): 99 % of a document's nodes may come from
    aliases up to 400,000 nodes, falling to 10 % at 4,000,000."""
    low, high = 400_000, 4_000_000
    if nodes <= low:
        return 0.99
    if nodes >= high:
        return 0.10
    return 0.99 - 0.89 * (nodes - low) / (high - low)


class Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
             yaml.constructor.SafeConstructor, _GoResolver):
    """Safe YAML that reads every plain scalar as Helm does (go-yaml v2 via sigs.k8s.io/yaml) and, as
    go-yaml does, refuses a document that its aliases would blow up."""

    def __init__(self, stream):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        _GoResolver.__init__(self)

    def construct_mapping(self, node, deep=False):
        """A mapping whose keys that are not strings stay apart as NonStringKey: in a dict, False, 0
        and 0.0 would be one key, while Helm reads "false", "0" and "0" (which the caller then checks).
        A key given again moves to the end, so that in document order the last one wins, as in Helm."""
        self.flatten_mapping(node)
        mapping = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            key = key if isinstance(key, str) else NonStringKey(key)
            mapping.pop(key, None)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def flatten_mapping(self, node):
        """Merge keys (<<) as go-yaml v2 applies them: in document order, so a key written before <<
        is replaced by the merged one and a key after it wins; of a list of mappings, the first wins."""
        pairs = []
        for key_node, value_node in node.value:
            if key_node.tag != _TAG + "merge":
                pairs.append((key_node, value_node))
                continue
            sources = [value_node] if isinstance(value_node, yaml.MappingNode) else (
                value_node.value[::-1] if isinstance(value_node, yaml.SequenceNode) else [None])
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        None, None, "map merge requires map or sequence of maps as the value", value_node.start_mark)
                self.flatten_mapping(source)
                pairs.extend(source.value)
        node.value = pairs

    def compose_scalar_node(self, anchor):
        tag = self.peek_event().tag
        node = super().compose_scalar_node(anchor)
        node.explicit = tag is not None  # a tag written in the document, not the resolver's
        if tag == "!":  # the non-specific tag: a string to go-yaml (PyYAML would resolve it as if plain)
            node.tag = _TAG + "str"
        return node

    def process_directives(self):
        if self.check_token(yaml.DirectiveToken):
            token = self.peek_token()
            raise yaml.parser.ParserError(None, None, f"the %{token.name} directive is not read (Helm refuses a "
                                          "values file with a directive); remove its line", token.start_mark)
        return super().process_directives()

    def compose_document(self):
        node = super().compose_document()
        if node is not None and self.anchors_used:
            nodes, aliased = _aliasing(node)
            if aliased > 100 and nodes > 1000 and aliased / nodes > _allowed_alias_ratio(nodes):
                raise ExcessiveAliasing(f"excessive aliasing: {nodes:,} nodes once its aliases are expanded")
        return node

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.anchors_used = True
        return super().compose_node(parent, index)

    anchors_used = False


_IMPLICIT = {_GO_NUMBER: _construct_go_number, _TAG + "bool": _construct_go_bool,
             _TAG + "null": lambda loader, node: None, _TAG + "float": yaml.constructor.SafeConstructor.construct_yaml_float,
             _TAG + "str": yaml.constructor.SafeConstructor.construct_scalar}
for _tag in [*Loader.yaml_constructors, _GO_NUMBER]:
    Loader.add_constructor(_tag, _construct_any)


def load(text: str):
    return yaml.load(text, Loader=Loader)


def load_all(text: str) -> list:
    return [doc for doc in yaml.load_all(text, Loader=Loader) if doc is not None]


class _Dumper(yaml.SafeDumper):
    pass


def is_plain_safe(text: str) -> bool:
    """Whether `text` reads back as the same string, bare, under YAML 1.1, YAML 1.2 and go-yaml."""
    return _PLAIN.fullmatch(text) is not None and text.lower() not in _RESERVED_WORDS


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=None if is_plain_safe(text) else '"')


_Dumper.add_representer(str, _represent_str)


def dump_all(docs: list) -> str:
    """A multi-document stream in block style; no line is ever folded."""
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=sys.maxsize)


def json_int(text: str) -> int | float:
    """A JSON integer (json.loads' parse_int): beyond 64 bits, the float Go's JSON reader makes of it,
    so that thousands of digits are a number out of range rather than Python's int() refusing them."""
    return int(text) if len(text) <= 20 else float(text)


def flow_value(value) -> str:
    """`value` as one JSON flow value for a template (JSON is YAML): characters YAML cannot carry raw are
    written as escapes, and no surrogate pairs (YAML reads \\uD83D\\uDE00 as two lone surrogates)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return _NOT_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
