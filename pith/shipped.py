"""What ships with the package: its version and the real registry bundles.

At the bottom of the import graph, so every layer (storage, crawler, mirror, the
command line) names the software and finds the embedded data the same way.
"""

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


def __getattr__(name: str) -> "Traversable":
    """``FIXTURES``: the real registry bundles shipped with the tool, the embedded
    default data. Package data read through importlib.resources, so it is found in a
    zipped egg too (a project Scrapyd runs): a folder when installed, a place in the
    archive there. Found on first use: importlib.resources brings tempfile and zipfile
    with it, and ``verify`` reads the shipped bundles only when it is given no path."""
    if name != "FIXTURES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _fixtures()


@cache
def _fixtures() -> "Traversable":
    from importlib.resources import files

    return files(__package__) / "fixtures"


def real_bundles() -> list[Any]:
    """The shipped real bundles (importlib.resources Traversables), in name order."""
    return sorted((p for p in _fixtures().iterdir() if p.name.endswith(".bundle.json")), key=lambda p: p.name)


@cache
def version() -> str:
    """The installed distribution's version, looked up on first use (importlib.metadata
    costs ``verify`` a third of its start-up)."""
    from importlib import metadata

    try:
        return metadata.version("pith-archiver")
    except metadata.PackageNotFoundError:  # running from a checkout that was not installed
        return "0.0.0+checkout"
