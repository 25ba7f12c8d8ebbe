"""pith-archiver: crawl, verify, archive and attest Pith open graph bundles."""

from pith.shipped import FIXTURES

__all__ = ["FIXTURES", "__version__"]


def __getattr__(name: str) -> str:
    """``__version__`` on first use (see pith.shipped.version)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pith.shipped import version

    return version()
