"""pith-archiver: crawl, verify, archive and attest Pith open graph bundles."""

from importlib import metadata
from pathlib import Path

try:
    __version__ = metadata.version("pith-archiver")
except metadata.PackageNotFoundError:  # running from a checkout that was not installed
    __version__ = "0.0.0+checkout"

FIXTURES = Path(__file__).parent / "fixtures"
"""The real registry bundles shipped with the tool: the embedded default data."""
