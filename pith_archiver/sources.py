"""Where ``verify`` reads bundles from: files, directories and http(s) URLs."""

import urllib.request
from pathlib import Path

from pith.parse import DEFAULT_MAX_BYTES
from . import __version__

USER_AGENT = f"pith-archiver/{__version__} (+https://github.com/pith-archiver)"


class SourceError(Exception):
    """A path or URL that could not be read at all (not a verdict on its content)."""


def expand(targets) -> list[str]:
    """Files stay, directories become every ``*.json`` (bundle) and ``*.jsonl``
    (attestation feed) file below them (sorted), URLs stay."""
    out = []
    for target in targets:
        if target.startswith(("http://", "https://")):
            out.append(target)
            continue
        path = Path(target)
        if path.is_dir():
            out.extend(str(p) for p in sorted(path.rglob("*.json*"))
                       if p.is_file() and p.suffix in (".json", ".jsonl"))
        else:
            out.append(target)
    return out


def read(target: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The exact bytes of a file or URL, reading at most one byte past ``max_bytes`` so
    the size check can name an oversize document without loading all of it."""
    try:
        if target.startswith(("http://", "https://")):
            request = urllib.request.Request(target, headers={"User-Agent": USER_AGENT,
                                                              "Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.read(max_bytes + 1)
        with open(target, "rb") as handle:
            return handle.read(max_bytes + 1)
    except (OSError, ValueError) as exc:
        raise SourceError(f"{target}: {exc}") from None
