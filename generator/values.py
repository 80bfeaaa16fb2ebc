"""Build the variables of a render: defaults ← files ← --set overrides, then validate."""

from __future__ import annotations

import json
import math
import struct
import sys
from typing import Any

import yaml

from . import set_values, yaml_text
from .merging import merge
from .checks import json_path, validation_errors
from .defaults import defaults
from .errors import UserError, ValidationFailed, excerpt, printable
from .names import DEFAULT_NAMESPACE


def read_document(path: str) -> dict:
    """Read one variables file (JSON or YAML; "-" is stdin) into a mapping, or raise UserError."""
    label = "<stdin>" if path == "-" else path or "''"
    try:
        if path == "-":
            text = sys.stdin.read(MAX_CHARACTERS + 1)
        else:
            with open(path, encoding="utf-8") as stream:
                text = stream.read(MAX_CHARACTERS + 1)
    except FileNotFoundError:
        raise UserError(f"{label}: no such file (examples: variables/examples/ in the repository; "
                        "no FILE at all renders the defaults, which `jaxgen defaults` prints)") from None
    except IsADirectoryError:
        raise UserError(f"{label}: is a directory, not a variables file") from None
    except OSError as exc:
        raise UserError(f"{label}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{label}: cannot read: not UTF-8 text") from None
    if len(text) > MAX_CHARACTERS:
        raise UserError(f"{label}: larger than {MAX_CHARACTERS // 2**20} MiB (a variables file is a few KiB)")
    if not text.strip():
        raise UserError(f"{label}: empty file (a variables file is a JSON or YAML mapping)")
    try:
        try:
            data = json.loads(text)
        except ValueError:
            data = _NOT_JSON
        if data is _NOT_JSON:
            data = yaml_text.load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{label}: not valid JSON/YAML{_where(exc)}") from None
    except yaml_text.ExcessiveAliasing as exc:
        raise UserError(f"{label}: {exc}") from None
    except RecursionError:
        raise UserError(f"{label}: nested more than {MAX_DEPTH} levels deep") from None
    if not isinstance(data, dict):
        raise UserError(f"{label}: $: expected a mapping of variables, got {_type_name(data)}")
    return as_values(data, label)


MAX_DEPTH = 64  # far deeper than any Kubernetes object; every later step may then recurse freely
MAX_CHARACTERS = 3 * 2**20  # read no further: what is larger is refused before it is parsed


def as_values(data: Any, label: str, path: tuple = (), argument: str | None = None) -> Any:
    """The data as Helm sees a values file: keys are strings (Go's YAML reader writes 1 as "1"),
    numbers are finite, a float that is a whole number is that integer (Helm prints 2.0 as 2), and
    nesting is bounded. Iterative, so no input can exhaust the stack here. `argument`: the command
    line's text the data was parsed from, if any (whose bytes that are not UTF-8 are named as bytes)."""
    root = [data]
    stack = [(root, 0, data, list(path))]
    while stack:
        parent, slot, node, where = stack.pop()
        if len(where) > MAX_DEPTH:
            raise UserError(f"{label}: {json_path(where[:3])}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            copy_, read_from = {}, {}
            for key, value in node.items():
                name = _key_text(key)
                if name is None:
                    raise UserError(f"{label}: {json_path(where)}: key {_yaml_text(key)} is not a string")
                _check_text(name, label, where + [name], argument)
                # The same key again: the last wins, as in Helm. Two scalars with one text (1 and "1"):
                # Helm keeps one of them at random (Go's map order), so neither is guessed here.
                origin = _origin(key)
                if read_from.setdefault(name, origin) != origin:
                    raise UserError(f"{label}: {json_path(where + [name])}: key given twice, as "
                                    f"{_yaml_text(read_from[name][1])} and {_yaml_text(origin[1])}; write it once")
                copy_[name] = value
            stack.extend((copy_, name, value, where + [name]) for name, value in copy_.items())
            parent[slot] = copy_
        elif isinstance(node, str):
            _check_text(node, label, where, argument)
        elif isinstance(node, list):
            copy_ = list(node)
            stack.extend((copy_, i, item, where + [i]) for i, item in enumerate(node))
            parent[slot] = copy_
        elif isinstance(node, float) and not isinstance(node, bool):
            if not math.isfinite(node):
                raise UserError(f"{label}: {json_path(where)}: {node} is not a number JSON or Kubernetes accept")
            if node.is_integer() and abs(node) < 2**53:
                parent[slot] = int(node)
    return root[0]


def _check_text(text: str, label: str, where: list, argument: str | None) -> None:
    """Refuse what is not Unicode text: a lone surrogate (a JSON or YAML escape of half a pair) or a
    byte that is not UTF-8 (Python hands on the command line's bytes as U+DC80-U+DCFF, so such a
    character in `argument`, the command line's text, is a byte). No YAML reader, Kubernetes'
    included, takes either, and they cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = ord(text[error.start])
        byte = 0xDC80 <= char <= 0xDCFF and argument is not None and chr(char) in argument
        what = f"byte 0x{char - 0xDC00:02x} is not UTF-8" if byte else \
            f"\\u{char:04x} is half of a surrogate pair, not a character"
        raise UserError(f"{label}: {printable(json_path(where)) + ': ' if where else ''}{what}") from None


def _origin(key: Any) -> tuple[str, Any]:
    """A key as go-yaml holds it before it becomes text: its type and value."""
    value = key.value if isinstance(key, yaml_text.NonStringKey) else key
    return type(value).__name__, value


def _yaml_text(key: Any) -> str:
    """A key that is not a string, as YAML writes it (null, true, 1.5), never as Python's repr."""
    value = key.value if isinstance(key, yaml_text.NonStringKey) else key
    try:
        return json.dumps(value, allow_nan=False) if not isinstance(value, (dict, list)) else "(a collection)"
    except (TypeError, ValueError):
        return excerpt(str(value))


def _key_text(key: Any) -> str | None:
    """A key as sigs.k8s.io/yaml turns it into a JSON key (Helm's reading); None where it refuses."""
    if isinstance(key, yaml_text.NonStringKey):
        key = key.value
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key) if -(2**63) <= key < 2**63 else None  # an unsigned 64-bit key is refused
    if isinstance(key, float) and math.isfinite(key):
        return _go_float_text(key)
    return None


def _go_float_text(number: float) -> str | None:
    """A float key as sigs.k8s.io/yaml writes it: strconv.FormatFloat(key, 'g', -1, 32), the shortest
    digits that give back the same float32, with an exponent below 1e-4 and from 1e6."""
    try:
        single = struct.unpack("f", struct.pack("f", number))[0]
    except OverflowError:
        single = math.copysign(math.inf, number)
    if math.isinf(single):  # beyond float32: Go's +Inf, which sigs.k8s.io/yaml writes as YAML's .inf
        return ".inf" if single > 0 else "-.inf"
    for precision in range(9):
        text = f"{single:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    digits, exp = mantissa.replace(".", "").replace("-", "").rstrip("0") or "0", int(exponent)
    sign = "-" if single < 0 else ""
    if exp < -4 or exp >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    whole, fraction = digits[:exp + 1].ljust(exp + 1, "0"), digits[exp + 1:]
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


_NOT_JSON = object()


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{at}: {problem}"


def load_values(files: list[str], sets: list[str] = (), target: str | None = None,
                namespace: str = DEFAULT_NAMESPACE, set_jsons: list[str] = (), set_strings: list[str] = ()) -> dict:
    """Merged and validated variables; raises UserError / ValidationFailed.

    As Helm does: the files merged in order, then every --set-json, --set and --set-string applied
    to them (generator/set_values.py), then all of it over the defaults. An empty `namespace`
    variable becomes `namespace`, the release's namespace (Helm's convention)."""
    user: dict = {}
    for path in files:
        user = merge(user, read_document(path), null_removes=False)
    for kind, arguments in (("json", set_jsons), ("set", sets), ("string", set_strings)):
        for argument in arguments:
            user = as_values(set_values.parse_into(argument, user, kind), set_values.FLAGS[kind], argument=argument)
    values = merge(defaults(), user)
    namespace = namespace or DEFAULT_NAMESPACE  # jaxgen render gives the kube context's (names.context_namespace)
    _check_text(namespace, "--namespace", [], namespace)
    if target is not None:
        values["target"] = target
    release_namespace = values.get("namespace") == ""
    if release_namespace:
        values["namespace"] = namespace
    errors = validation_errors(values)
    if errors:
        if release_namespace:  # a bad namespace came from the option, not the variables
            errors = [f"--namespace{e[len('$.namespace'):]}" if e.startswith("$.namespace:") else e for e in errors]
        raise ValidationFailed(errors)
    return values


def _type_name(value: Any) -> str:
    return {type(None): "null", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)

