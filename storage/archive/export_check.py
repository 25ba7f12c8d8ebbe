"""Verifying again, before an export writes anything, every raw bundle it includes:
under the keys the reader pins (``CommittedArchive.keyring``), with their roles, and
the size rule. Every export format (a bag, a Parquet dataset, a release, a WACZ)
calls ``check_included`` first, so an archive holding a bundle that does not verify
here (re-signed with a stolen archiver key, or signed by a registry key this reader
does not pin) is refused alike by all of them, and nothing is exported."""

from collections.abc import Callable, Collection

from pith.reasons import Reason
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.reader import CommittedArchive, read_entry, table_batches
from storage.archive.stores import ObjectInfo

Progress = Callable[[int, int], None]  # on_checked(done, total)


class BundleRejected(Exception):
    """A bundle an export includes does not verify: the archive needs an audit (or the
    reader a key), not an export."""


def included_bundles(archive: CommittedArchive, versions: Collection[str | None] | None = None) -> list[ObjectInfo]:
    """The committed raw bundles of ``versions`` (bundle_sha256s; their raw_path in the
    records table), by path; every committed raw bundle with None. BundleRejected when
    a version has no committed raw bundle: the export could not show what it holds."""
    if versions is None:
        return archive.under(f"{layout.RAW}/")
    wanted = set(versions)
    found: dict[str, str] = {}  # raw_path -> bundle_sha256
    for entry in archive.table_files("records"):
        for batch in table_batches(archive.store, entry, ["bundle_sha256", "raw_path"]):
            columns = (batch.column(name).to_pylist() for name in ("raw_path", "bundle_sha256"))
            found.update((path, bundle) for path, bundle in zip(*columns) if bundle in wanted)
    lost = [f"bundle version {v}" for v in sorted(map(str, wanted - set(found.values())))]
    lost += sorted(set(found) - set(archive.objects))
    if lost:
        raise BundleRejected(f"{lost[0]}: not committed: nothing exported; audit the archive")
    return [archive.objects[path] for path in sorted(found)]


def check_included(
    archive: CommittedArchive, versions: Collection[str | None] | None = None, on_checked: Progress | None = None
) -> int:
    """Verify each raw bundle of ``versions`` (``included_bundles``), read checked
    against its manifest entry; BundleRejected at the first that does not verify.
    Returns how many were checked."""
    entries = included_bundles(archive, versions)
    for done, entry in enumerate(entries, 1):
        verdict = verify_bundle(read_entry(archive.store, entry), archive.keyring)
        if not verdict.ok:
            fix = "pin the key that signed it (--keyring FILE) if you trust it, or audit the archive"
            raise BundleRejected(
                f"{entry.path} does not verify ({verdict.reason} at {verdict.path or '<document>'}: "
                f"{verdict.detail}): nothing exported; "
                + (fix if verdict.reason == Reason.UNKNOWN_KEY else "audit the archive")
            )
        if on_checked is not None:
            on_checked(done, len(entries))
    return len(entries)
