"""What ships with the package: its version and the real registry bundles.

At the bottom of the import graph, so every layer (storage, crawler, mirror, the
command line) names the software and finds the embedded data the same way.
"""

from functools import cache
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
"""The real registry bundles shipped with the tool: the embedded default data."""


@cache
def version() -> str:
    """The installed distribution's version, looked up on first use (importlib.metadata
    costs ``verify`` a third of its start-up)."""
    from importlib import metadata

    try:
        return metadata.version("pith-archiver")
    except metadata.PackageNotFoundError:  # running from a checkout that was not installed
        return "0.0.0+checkout"
