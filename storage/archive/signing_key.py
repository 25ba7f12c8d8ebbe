"""The archiver's own signing key: where it lives and how it is made on first use.

It signs manifests and storage attestations. It is kept outside the archive so that
whoever can write to the archive cannot also sign for it.
"""

import logging
import os
from pathlib import Path

from pith.signing import Signer

logger = logging.getLogger(__name__)


def default_key_path() -> Path:
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "pith-archiver" / "signing-key.json"


def new_key_id(signer_host: str | None = None) -> str:
    import socket  # only to name a new key: off the start-up of commands that only read

    host = "".join(c if c.isalnum() or c == "-" else "-" for c in (signer_host or socket.gethostname()).lower())
    return f"pith-archiver-{host[:40]}"


def new_signer(key_id: str | None = None) -> Signer:
    """A new Ed25519 key under ``key_id``; by default named after the host and the
    key's own fingerprint, so keys made on two machines never share an id."""
    if key_id:
        return Signer.generate(key_id)
    generated = Signer.generate(new_key_id())
    return Signer.from_seed(f"{generated.key_id}-{generated.fingerprint[:8]}", generated.seed)


class NoSuchKey(FileNotFoundError):
    """A key file named that does not exist: only the default key is made on first use,
    so a mistyped path never becomes a new key that signs the archive."""


def load_or_create(path: str | os.PathLike[str] | None) -> Signer:
    """Load the key at ``path``, which must exist; with no ``path``, this user's key
    (``default_key_path``), made on first use, saying where, since whoever verifies the
    archive will need its public half."""
    if path and not Path(path).exists():
        raise NoSuchKey(f"{path}: no such signing key file (only the default, {default_key_path()}, is made)")
    path = Path(path) if path else default_key_path()
    if path.exists():
        return Signer.load(path)
    signer = new_signer()
    signer.save(path)
    logger.warning(
        "created the archiver signing key %s at %s (keep it safe; its public key is "
        "published in the archive under keys/)",
        signer.key_id,
        path,
    )
    return signer
