"""Copying committed objects out of an archive (``storage.publishing.export``): each streamed,
never held whole, and checked against its manifest entry on the way, so a copy
carries only bytes the archive committed."""

import hashlib
from pathlib import Path

from storage.archive.manifest import verify_manifest
from storage.archive.reader import CommittedArchive, check_digest
from storage.archive.stores import ObjectInfo, ObjectStore


def copy_object(store: ObjectStore, entry: ObjectInfo, target: Path) -> None:
    """Copy one committed object to a new local file, checking it against its entry."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(target, "xb") as out:
        for chunk in store.read_chunks(entry.path):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    check_digest(entry, digest.hexdigest(), size)


def copy_manifest(archive: CommittedArchive, path: str, folder: Path) -> int:
    """Copy a manifest's exact bytes into ``folder``, verified again as they are copied; their size."""
    data = archive.store.get_bytes(path)
    verify_manifest(data, archive.keyring)
    target = folder / path
    target.parent.mkdir(parents=True, exist_ok=True)
    return target.write_bytes(data)
