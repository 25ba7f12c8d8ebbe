"""Verifying an archive's raw bundles again before an export is published
(``storage.publishing.export``): under the registry keys, with their roles, and the size rule. An
archive holding one that does not verify (say, re-signed with a stolen archiver key)
is not exported at all."""

from pith.keyring import Keyring
from pith.verify import verify_bundle
from storage.archive.stores import ObjectInfo


class BundleRejected(Exception):
    """A committed raw bundle does not verify: the archive needs an audit, not an export."""


def check_bundle(entry: ObjectInfo, data: bytes, keyring: Keyring) -> None:
    """Raise BundleRejected unless ``data``, the bytes of the raw bundle ``entry``, verifies."""
    verdict = verify_bundle(data, keyring)
    if not verdict.ok:
        raise BundleRejected(
            f"{entry.path} does not verify ({verdict.reason} at {verdict.path or '<document>'}: "
            f"{verdict.detail}): nothing exported; audit the archive"
        )
