"""Helm's merge of values: of the files over each other, of --set-json objects, of all over the defaults."""

from __future__ import annotations


def merge(base: dict, override: dict, null_removes: bool = True) -> dict:
    """Helm's merge: mappings merge key by key, anything else (lists included) is replaced.

    Over the defaults (null_removes), as in Helm, a null removes a default mapping (e.g.
    `resources: {requests: null}` drops the default requests); a null over a scalar stays null, which
    renders as Helm's missing key does. Between user files and --set values a null is just a value that
    a later mapping replaces, as Helm merges its -f files before it applies them to the defaults.
    """
    merged = dict(base)
    for key, value in override.items():
        if value is None and null_removes and isinstance(merged.get(key), dict):
            del merged[key]
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value, null_removes)
        else:
            merged[key] = value
    return merged
