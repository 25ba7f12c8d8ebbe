"""``serve ARCHIVE`` is a ResourceSync source: ``resync-sync`` (PyPI ``resync``, the
reference client, run as a subprocess over real sockets) copies every bundle from
``/.well-known/resourcesync``, follows a later run through the Change List its
Capability List names, fetching exactly the records that run changed, and audits the
copy in sync, against ``pith-archiver serve`` left running while the run commits."""

import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from xml.etree.ElementTree import Element

import pytest
from defusedxml import ElementTree

from storage.archive.folder_store import LocalStore
from storage.archive.reader import reading_keyring
from storage.publishing.resourcesync import RS_NS, SITEMAP_NS
from storage.serving.archive_source import ArchiveSource
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, extended, write_run
from tests.plugins.mirror import serve_process
from tests.plugins.scripted_site import clock_at
from tests.test_archive_mirror import fetch

RESYNC = Path(sys.executable).parent / "resync-sync"
NS = {"sm": SITEMAP_NS, "rs": RS_NS}
REBUILT_AT = "2026-06-02T00:00:00Z"


def resync(cwd: Path, *args: str) -> str:
    """What ``resync-sync`` said (it logs to stderr, and exits 0 even on a fatal error)."""
    done = subprocess.run([str(RESYNC), "--verbose", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "FatalError" not in said, said
    return said


def document(url: str) -> Element:
    status, body = fetch(url)
    assert status == 200, url
    return ElementTree.fromstring(body)


def capability(url: str, name: str) -> str:
    """The URL of capability ``name``, found as a client finds it: from the Source Description."""
    listing = document(url + "/.well-known/resourcesync").find("sm:url/sm:loc", NS)
    assert listing is not None and listing.text
    for entry in document(listing.text).findall("sm:url", NS):
        md, loc = entry.find("rs:md", NS), entry.find("sm:loc", NS)
        if md is not None and loc is not None and md.get("capability") == name:
            return str(loc.text)
    raise AssertionError(f"no {name} in the Capability List")


def changes_listed(url: str) -> int:
    return len(document(capability(url, "changelist")).findall("sm:url", NS))


def copied(dst: Path) -> dict[str, bytes]:
    return {path.parent.name: path.read_bytes() for path in dst.glob("pith/*/bundle.json")}


@pytest.fixture
def archive(tmp_path, corpus_dir, corpus_keyring, test_signer):
    store = LocalStore(tmp_path / "archive")
    write_run(store, test_signer, corpus_keyring, list(corpus_raws(corpus_dir).values()))
    return store


@pytest.mark.slow
def test_resync_copies_follows_by_change_and_audits_a_served_archive(
    tmp_path, archive, corpus_dir, corpus_keyring, test_signer
):
    raws, dst = corpus_raws(corpus_dir), tmp_path / "copy"
    options = ["--keyring", str(corpus_dir / KEYRING_NAME), "--trust-archive-keys", "--reread-every", "0.1"]
    with serve_process(archive.root, *options) as (_, url):
        said = resync(tmp_path, "--baseline", url, str(dst))
        assert "created=43" in said
        assert copied(dst) == raws
        changed = sorted(raws)[::9]  # 5 records of 43
        new = {suffix: extended(raws[suffix], REBUILT_AT) for suffix in changed}
        write_run(archive, test_signer, corpus_keyring, list(new.values()))  # fetched before the first run committed
        deadline = time.monotonic() + 20
        while changes_listed(url) == 43 and time.monotonic() < deadline:  # picked up as requests come
            time.sleep(0.1)
        assert changes_listed(url) == 48
        said = resync(tmp_path, "--incremental", "--changelist-uri", capability(url, "changelist"), url, str(dst))
        updated = set(re.findall(r"updated: \S+/pith/(\w+)/bundle\.json ->", said))
        assert updated == set(changed)
        assert "CHANGES APPLIED (created=0, updated=5, deleted=0)" in said
        assert copied(dst) == {**raws, **new}
        said = resync(tmp_path, "--audit", "--hash", "sha-256", url, str(dst))
        assert "IN SYNC (same=43, to create=0, to update=0, to delete=0)" in said
        said = resync(tmp_path, "--incremental", "--changelist-uri", capability(url, "changelist"), url, str(dst))
        assert "NO CHANGES" in said


@pytest.mark.slow
def test_lists_longer_than_a_page_are_indexed_and_each_page_holds_its_share(
    tmp_path, archive, corpus_dir, corpus_keyring, test_signer
):
    raws = corpus_raws(corpus_dir)
    changed = sorted(raws)[:12]
    write_run(archive, test_signer, corpus_keyring, [extended(raws[s], REBUILT_AT) for s in changed])
    options = ["--keyring", str(corpus_dir / KEYRING_NAME), "--trust-archive-keys", "--sitemap-page-size", "10"]
    with serve_process(archive.root, *options) as (_, url):
        said = resync(tmp_path, "--baseline", url, str(tmp_path / "copy"))
        assert "created=43" in said
        assert copied(tmp_path / "copy") == {**raws, **{s: extended(raws[s], REBUILT_AT) for s in changed}}
        resources = document(capability(url, "resourcelist"))
        assert resources.tag == f"{{{SITEMAP_NS}}}sitemapindex"
        assert len(resources.findall("sm:sitemap", NS)) == 5
        index = document(capability(url, "changelist"))
        assert index.tag == f"{{{SITEMAP_NS}}}sitemapindex"
        pages = [document(str(loc.text)) for loc in index.findall("sm:sitemap/sm:loc", NS)]
        kinds = [md.get("change") for page in pages for md in page.findall("sm:url/rs:md", NS)]
        assert len(pages) == 5 + 2  # the first run's 43 changes in five pages, the second's 12 in two
        assert (kinds.count("created"), kinds.count("updated")) == (43, 12)
        created = [str(e.findtext("sm:loc", "", NS))[-38:-12] for page in pages[:5] for e in page.findall("sm:url", NS)]
        assert sorted(created) == sorted(raws)  # each record once, across pages read from the middle of its tables
        spans = [(md.get("from"), md.get("until")) for md in index.findall("sm:sitemap/rs:md", NS)]
        assert spans == sorted(spans) and spans[0][1] < spans[-1][0]  # the second run's span after the first's
        assert fetch(f"{url}/resourcesync/changelist-nothing-00001.xml")[0] == 404
        assert fetch(f"{url}/resourcesync/resourcelist-6.xml")[0] == 404


def test_a_new_run_that_cannot_be_read_leaves_the_runs_read_before_served(
    tmp_path, archive, corpus_dir, corpus_keyring, test_signer, caplog
):
    raws = corpus_raws(corpus_dir)
    source = ArchiveSource(archive, reading_keyring(archive, corpus_keyring, archive_keys=True))
    with BackgroundMirror(MirrorServer(source, renew_every=0.05)) as server:
        assert changes_listed(server.url) == 43
        manifest = write_run(
            archive, test_signer, corpus_keyring, [extended(raws[s], REBUILT_AT) for s in sorted(raws)[:2]]
        )
        run_id = Path(str(manifest)).stem
        for table in (archive.root / "tables" / "records").rglob(f"part-{run_id}-*.parquet"):
            table.write_bytes(b"not what the manifest lists")  # altered before the server read it
        deadline = time.monotonic() + 10
        while "could not be read" not in caplog.text and time.monotonic() < deadline:
            changes_listed(server.url)
            time.sleep(0.05)
        assert server.source is source and changes_listed(server.url) == 43
        time.sleep(0.3)
        changes_listed(server.url)
    assert caplog.text.count("the new runs could not be read") == 1  # not again until the manifests change
    assert "serving the runs read before" in caplog.text


FAST_CLOCK_RUN = """
import sys
from pathlib import Path
from pith.keyring import Keyring
from pith.signing import Signer
from tests.plugins.archives import write_run
from storage.archive.folder_store import LocalStore

archive, keyring, *bundles = sys.argv[1:]
write_run(
    LocalStore(Path(archive)),
    Signer.from_seed("test-key-1", bytes(range(32))),
    Keyring.build([Path(keyring)], default_keys=False),
    [Path(bundle).read_bytes() for bundle in bundles],
)
"""


@pytest.mark.slow
def test_a_run_committed_under_a_fast_clock_does_not_hide_the_runs_after_it(
    tmp_path, archive, corpus_dir, corpus_keyring, test_signer
):
    """A run whose machine's clock ran 30 days fast commits in the future; a client that
    followed it still takes the next honest run's changes (a run in the future is served as
    committed just after the newest past one, so the client never resumes from the future)."""
    raws, dst = corpus_raws(corpus_dir), tmp_path / "copy"
    fast, honest = sorted(raws)[:5], sorted(raws)[5:10]
    options = ["--keyring", str(corpus_dir / KEYRING_NAME), "--trust-archive-keys", "--reread-every", "0.1"]
    with serve_process(archive.root, *options) as (_, url):
        assert "created=43" in resync(tmp_path, "--baseline", url, str(dst))
        bundles = []
        for suffix in fast:
            bundles.append(tmp_path / f"{suffix}.json")
            bundles[-1].write_bytes(extended(raws[suffix], REBUILT_AT))
        env = {**os.environ, **clock_at(datetime.now(timezone.utc) + timedelta(days=30))}
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                FAST_CLOCK_RUN,
                str(archive.root),
                str(corpus_dir / KEYRING_NAME),
                *map(str, bundles),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        wait_for_changes(url, 48)
        changelist = capability(url, "changelist")
        said = resync(tmp_path, "--incremental", "--changelist-uri", changelist, url, str(dst))
        assert set(re.findall(r"updated: \S+/pith/(\w+)/bundle\.json ->", said)) == set(fast)

        later = {suffix: extended(raws[suffix], "2026-06-03T00:00:00Z") for suffix in honest}
        # committed by this machine's honest clock, its records fetched long before (FETCHED_AT):
        # a run whose fetches overlapped the copy's last read loses none of them either
        write_run(archive, test_signer, corpus_keyring, list(later.values()))
        wait_for_changes(url, 53)
        said = resync(tmp_path, "--incremental", "--changelist-uri", changelist, url, str(dst))
        assert set(honest) <= set(re.findall(r"updated: \S+/pith/(\w+)/bundle\.json ->", said))
        assert copied(dst) == {**raws, **{s: extended(raws[s], REBUILT_AT) for s in fast}, **later}
        served = [md.get("until") for md in document(changelist).findall("sm:sitemap/rs:md", NS)] or [
            md.get("until") for md in document(changelist).findall("rs:md", NS)
        ]
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert all(until <= now for until in filter(None, served)), served


def wait_for_changes(url: str, count: int) -> None:
    """Until the served mirror has read the new run (it rereads its archive as requests come)."""
    deadline = time.monotonic() + 20
    while changes_listed(url) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    assert changes_listed(url) == count
