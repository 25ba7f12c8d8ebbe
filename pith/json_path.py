"""Paths into a JSON document, as a verdict names what broke (``events[0].payload.receipt.key_id``):
finding the first place two documents differ, and reading the value a path names."""

import re
from typing import Any

_MISSING = object()
PATH_STEP = re.compile(r"([^.\[\]]+)|\[([0-9]+)\]")


def first_difference(expected: Any, found: Any, path: str = "") -> str:
    """Path of the first place two JSON values differ (for people reading a verdict)."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in sorted(set(expected) | set(found)):
            if expected.get(key, _MISSING) != found.get(key, _MISSING):
                sub = f"{path}.{key}" if path else key
                return first_difference(expected.get(key), found.get(key), sub)
    elif isinstance(expected, list) and isinstance(found, list):
        for index, (a, b) in enumerate(zip(expected, found)):
            if a != b:
                return first_difference(a, b, f"{path}[{index}]")
        if len(expected) != len(found):
            return f"{path}[{min(len(expected), len(found))}]"
    return path


def value_at(doc: Any, path: str) -> Any:
    """The value a verdict's ``path`` names in ``doc`` (``events[0].payload.receipt.key_id``);
    None when there is none."""
    for name, index in PATH_STEP.findall(path):
        try:
            doc = doc[int(index)] if index else doc[name]
        except (KeyError, IndexError, TypeError):
            return None
    return doc
