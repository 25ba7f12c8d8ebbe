"""pith-archiver: crawl, verify, archive and attest Pith open graph bundles."""

from typing import Any

__all__ = ["FIXTURES", "__version__"]


def __getattr__(name: str) -> Any:
    """``__version__`` and ``FIXTURES`` on first use (see pith.shipped): each costs
    a command's start-up more than most commands need them."""
    from pith import shipped

    if name == "__version__":
        return shipped.version()
    if name == "FIXTURES":
        return shipped.FIXTURES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
