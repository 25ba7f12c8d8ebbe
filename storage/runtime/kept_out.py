"""Libraries a process keeps out, as if they were not installed.

Some libraries import others when they happen to be installed, for features a
process of ours never uses: pyarrow imports numpy (and pandas on its first conversion)
and, with ``pyarrow.parquet``, its bindings to remote filesystems; warcio imports
fsspec. Each costs megabytes for the life of the process. ``keep_out`` refuses them
from then on; call it before the library that would import them is imported, in the
process's own entry only (it holds for the whole interpreter).
"""

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType


class KeptOut(importlib.abc.MetaPathFinder):
    """Refuses to import ``names`` (packages or modules of a package, and what they
    hold), naming ``reason``."""

    def __init__(self, names: Sequence[str], reason: str) -> None:
        self.names = frozenset(names)
        self.reason = reason

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if any(".".join(parts[:depth]) in self.names for depth in range(1, len(parts) + 1)):
            raise ModuleNotFoundError(f"No module named {fullname!r} ({self.reason})", name=fullname)
        return None


def keep_out(names: Sequence[str], reason: str) -> None:
    """From now on, importing any of ``names`` fails as if it were not installed
    (``reason`` says why, in the error). Modules already imported stay."""
    if not any(isinstance(finder, KeptOut) and finder.names == frozenset(names) for finder in sys.meta_path):
        sys.meta_path.insert(0, KeptOut(names, reason))
