"""pith-archiver: crawl, verify, archive and attest Pith open graph bundles."""

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
"""The real registry bundles shipped with the tool: the embedded default data."""


def __getattr__(name: str):
    """``__version__`` on first use: importlib.metadata costs ``verify`` a third of its start-up."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata
    try:
        version = metadata.version("pith-archiver")
    except metadata.PackageNotFoundError:  # running from a checkout that was not installed
        version = "0.0.0+checkout"
    globals()["__version__"] = version
    return version
