"""Integers read from text a person or a launcher wrote (flags, variables, files): ASCII digits with
an optional minus sign, nothing else. int() alone also takes ' 2', '+2', '1_0' and any Unicode digit
('\u0662', '\uff12'), and raises ValueError past its limit on digits (4300). Standard library only:
jaxgen reads this module."""

from __future__ import annotations

import argparse
import re

# Far beyond any count, port or size; int() refuses more than 4300 digits.
MAX_DIGITS = 1000
_INTEGER = re.compile(r"-?[0-9]+")
_COUNT = re.compile(r"[0-9]+")


def parse_int(text) -> int | None:
    """The integer `text` spells in ASCII decimal digits (an optional minus sign first), else None."""
    if not isinstance(text, str) or not _INTEGER.fullmatch(text) or len(text) > MAX_DIGITS + 1:
        return None
    return int(text)


def is_count(text) -> bool:
    """Whether `text` is a count: ASCII decimal digits, no sign (str.isdigit() also takes '²')."""
    return isinstance(text, str) and _COUNT.fullmatch(text) is not None


def parse_count(text) -> int | None:
    """The count `text` spells (see is_count), else None."""
    return parse_int(text) if is_count(text) else None


def shown(text: str) -> str:
    """`text` quoted for a one-line error: its start and length when it is long."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}… ({len(text)} characters)"


def ascii_int(text: str) -> int:
    """argparse's type for an integer flag: a value parse_int refuses is the usual usage error (exit 2),
    argument --FLAG: 'VALUE' is not an integer."""
    number = parse_int(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not an integer")
    return number


def count_less(a: str, b: str) -> bool:
    """Whether the count `a` (ASCII digits, [0-9]+) is below `b`, at any length: int() refuses more
    than 4300 digits."""
    a, b = a.lstrip("0") or "0", b.lstrip("0") or "0"
    return (len(a), a) < (len(b), b)
