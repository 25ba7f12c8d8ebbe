"""A dataset release checked whole, wherever it lies (a folder or an S3 prefix): its
``release.json`` signed by a pinned archive key (``pith.release``), every file it
lists at its size and sha256, and no file it does not list in the folders it writes
(``data/``, ``index/``), where globs and ``datasets`` configs would read it. ``verify
release.json`` and ``export --since`` both judge a release by this one function."""

from pith.keyring import Keyring
from pith.reasons import Reason, Rejected
from pith.release import RELEASE_LIMITS, check_release
from storage.archive.layout import LayoutError, check_path
from storage.archive.stores import ObjectStore, StorageError

RELEASE_FILE = "release.json"


def _release_bytes(location: ObjectStore) -> bytes:
    """``release.json``'s bytes, at most one past the size limit (the parser names an
    oversize one); StorageError when there is none."""
    data = bytearray()
    for chunk in location.read_chunks(RELEASE_FILE):
        data += chunk
        if len(data) > RELEASE_LIMITS.max_bytes:
            break
    return bytes(data)


def verify_release(location: ObjectStore, keyring: Keyring) -> dict:
    """The release in ``location`` once all of it holds; Rejected with the first thing
    that does not, StorageError when ``release.json`` cannot be read at all."""
    release = check_release(_release_bytes(location), keyring)
    listed: dict[str, int] = {}
    for index, entry in enumerate(release["files"]):
        try:
            listed[check_path(str(entry.get("path")))] = index
        except LayoutError as exc:
            raise Rejected(Reason.SCHEMA_VIOLATION, f"files[{index}].path", str(exc)) from None
    for folder in sorted({path.split("/")[0] for path in listed if "/" in path}):
        for stored in location.list(f"{folder}/"):
            if stored.path not in listed:
                raise Rejected(Reason.RELEASE_UNLISTED_FILE, "files", f"{stored.path} is in the release, not listed")
    for path, index in listed.items():
        entry = release["files"][index]
        try:
            found = location.digest(path)
        except StorageError as exc:
            raise Rejected(Reason.RELEASE_FILE_MISMATCH, f"files[{index}]", f"{path}: {exc}") from None
        if (found.size, found.sha256) != (entry.get("size"), entry.get("sha256")):
            raise Rejected(Reason.RELEASE_FILE_MISMATCH, f"files[{index}]", f"{path} differs")
    return release
