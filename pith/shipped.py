"""What ships with the package: its version and the real registry bundles.

At the bottom of the import graph, so every layer (storage, crawler, mirror, the
command line) names the software and finds the embedded data the same way.
"""

from functools import cache
from importlib.resources import files
from typing import Any

FIXTURES = files(__package__) / "fixtures"
"""The real registry bundles shipped with the tool: the embedded default data. Package
data read through importlib.resources, so it is found in a zipped egg too (a project
Scrapyd runs): a folder when installed, a place in the archive there."""


def real_bundles() -> list[Any]:
    """The shipped real bundles (importlib.resources Traversables), in name order."""
    return sorted((p for p in FIXTURES.iterdir() if p.name.endswith(".bundle.json")), key=lambda p: p.name)


@cache
def version() -> str:
    """The installed distribution's version, looked up on first use (importlib.metadata
    costs ``verify`` a third of its start-up)."""
    from importlib import metadata

    try:
        return metadata.version("pith-archiver")
    except metadata.PackageNotFoundError:  # running from a checkout that was not installed
        return "0.0.0+checkout"
