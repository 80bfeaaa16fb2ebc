"""YAML in and out, written so that every YAML 1.1 and 1.2 reader decodes the same data.

Kubernetes, kubectl and Helm read YAML with sigs.k8s.io/yaml (go-yaml v2): YAML 1.1 booleans such as
y, n and on, and Go's number syntax (3e-05, 0o17, 1_000, 0x1F). PyYAML reads YAML 1.1 without most of
those, so a string it writes bare can reach the API server as a number or a boolean. Here a string is
written bare only when it cannot be anything but a string to any reader; every other one is quoted.
"""

from __future__ import annotations

import json
import re
import sys

import yaml

# Bare only: ASCII, starting with a letter, "/" or a flag's dashes, no indicator anywhere, and a colon
# only inside a word (ghcr.io/org/image:1.0, https://host/path).
_PLAIN = re.compile(r"(?:--?[A-Za-z]|[A-Za-z/])(?:[A-Za-z0-9_./-]|:(?=[A-Za-z0-9_./-]))*")
# Every word some reader takes for a boolean or null (YAML 1.1, YAML 1.2 core, go-yaml), any case.
_RESERVED_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
# What YAML cannot carry raw even inside quotes: non-printable characters, and the characters that
# YAML 1.1 reads as line breaks (NEL, LS, PS) or strips (BOM).
_NOT_RAW = re.compile("[^\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


class Loader(yaml.SafeLoader):
    """Safe YAML with YAML 1.2 floats, so 1e-5 is a number as in JSON and Go (YAML 1.1 wants 1.0e-5)."""


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),  # exponent forms only; YAML 1.1 already reads the rest
)


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


def flow_value(value) -> str:
    """`value` as one JSON flow value for a template (JSON is YAML): characters YAML cannot carry raw are
    written as escapes, and no surrogate pairs (YAML reads \\uD83D\\uDE00 as two lone surrogates)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return _NOT_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
