"""A re-run reads the resolver's ResourceSync Change Lists instead of its sitemaps: the
test kit's registry that changes week by week, exported as plain files with its
ResourceSync documents and served by nginx, crawled into one archive week after week.
Every request is counted in nginx's access log; every record's current version is
checked against the bundle the registry serves that week. Hostile documents (another
site's entries, a list past the size cap, an index of thousands of lists, an index
inside an index, a Capability List that is not one) are written over the registry's."""

import hashlib
import json
import socket
from pathlib import Path

import pytest

from pith_testkit.static import export_site
from pith_testkit.virtual import VirtualCorpus
from pith_testkit.weeks import Weeks
from storage.serving.resolver import SiteOptions
from storage.serving.source import KEYRING_NAME
from tests.plugins.crawling import run_cli_crawl
from tests.test_weekly_run import current

RECORDS = 1000
RS = "/resourcesync/"


class Registry:
    """One registry's weeks, exported into one folder that nginx serves."""

    def __init__(self, root: Path, base: str, weeks: Weeks, page_size: int, log: Path):
        self.root, self.base, self.weeks, self.page_size, self.log = root, base, weeks, page_size, log

    def week(self, week: int) -> None:
        weeks = Weeks(week, self.weeks.changed, self.weeks.dates, self.weeks.lying)
        source = VirtualCorpus(RECORDS, 1, self.base, weeks=weeks, resourcesync=True)
        export_site(source, self.base, self.root / "site", SiteOptions(sitemap_page_size=self.page_size))
        source.write_keyring(self.root / KEYRING_NAME)

    def served(self) -> dict[str, str]:
        """Each record's bundle as served now: suffix -> sha-256 of its bytes."""
        return {
            path.parent.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in (self.root / "site" / "pith").glob("*/bundle.json")
        }

    def write(self, path: str, text: str | bytes) -> None:
        """A document of the site, written over the registry's own."""
        target = self.root / "site" / path.lstrip("/")
        target.write_bytes(text.encode() if isinstance(text, str) else text)

    def crawl(self, tmp_path: Path, *args: str):
        self.log.write_text("")
        archive = tmp_path / "archive"
        result = run_cli_crawl(tmp_path, *args, "sitemap", resolver=self.base, out=archive, corpus=self.root)
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        return result, self.log.read_text().splitlines()


@pytest.fixture
def registry(tmp_path, nginx):
    def make(weeks: Weeks, page_size: int = 50_000) -> Registry:
        log = tmp_path / "access.log"
        base = nginx(tmp_path / "registry" / "site", access_log=log)
        return Registry(tmp_path / "registry", base, weeks, page_size, log)

    return make


def fetched(requests: list[str]) -> set[str]:
    """The records whose bundle was sent whole."""
    return {line.split("/")[2] for line in requests if line.endswith("/bundle.json 200")}


def listing(requests: list[str]) -> list[str]:
    return [line for line in requests if "/pith/" not in line]


def changed_since_held(tmp_path: Path, registry: Registry) -> set[str]:
    held = current(tmp_path / "archive")
    return {suffix for suffix, sha in registry.served().items() if held.get(suffix) != sha}


@pytest.mark.slow
def test_each_week_the_change_lists_name_what_is_asked(tmp_path, registry):
    """Honest Change Lists: a re-run asks the records they name and the sample, never
    the sitemaps; a Change List Index's pages that ended before the newest change the
    last finished run read are not read again."""
    reg = registry(Weeks(changed=0.05, dates="honest"), page_size=60)  # past 60 changes: an index of lists
    reg.week(0)
    first, requests = reg.crawl(tmp_path)
    assert current(tmp_path / "archive") == reg.served()
    assert not any("resourcesync" in line for line in requests)  # a first run reads the sitemaps alone

    for week in (1, 2, 3):
        reg.week(week)
        changed = changed_since_held(tmp_path, reg)
        assert len(changed) == RECORDS * 5 // 100
        result, requests = reg.crawl(tmp_path)
        assert current(tmp_path / "archive") == reg.served()  # every new version archived
        assert fetched(requests) == changed  # the sample heard 304s: nothing else was sent whole
        sampled = result.stat("recheck_sample") + result.stat("recheck_due")
        assert len(requests) - len(listing(requests)) <= len(changed) + sampled
        assert result.stat("records_dated_changed") == len(changed)  # each held record counted once
        assert result.stat("records_skipped_by_date") == RECORDS - len(changed) - sampled
        assert result.stat("lastmod_distrusted") == 0 and result.stat("change_lists_unread") == 0
        read = listing(requests)
        assert not any("sitemap" in line for line in read), read
        assert "GET /.well-known/resourcesync 200" in read and f"GET {RS}capabilitylist.xml 200" in read
        assert "dates trusted: " in result.stdout
    # week 3 of 5% changes is an index of a list a week: week 1's ended before the newest
    # change week 2's run read, and is not read again
    assert f"GET {RS}changelist.xml 200" in read
    pages = [line for line in read if "changelist-" in line]
    assert len(pages) == 2 and not any("week-00001" in line for line in pages), pages
    assert result.stat("change_lists_read") == 2
    (kept,) = tmp_path.rglob("freshness.json")
    assert json.loads(kept.read_text())["read_to"][reg.base].startswith("20")


@pytest.mark.slow
def test_records_a_change_list_leaves_out_are_found_by_the_sample(tmp_path, registry):
    """Lying Change Lists (a fifth of the records changed, their changes left out): the
    sample finds one, the dates are distrusted, every record is asked through the
    sitemaps, and every new version is archived."""
    reg = registry(Weeks(changed=0.20, dates="lying"))
    reg.week(0)
    reg.crawl(tmp_path)
    reg.week(1)
    result, requests = reg.crawl(tmp_path)
    assert current(tmp_path / "archive") == reg.served()
    assert f"GET {RS}changelist.xml 200" in requests
    assert result.stat("lastmod_distrusted") == 1 and result.stat("lastmod_lies") >= 1
    assert "dates not trusted: " in result.stdout
    assert "GET /sitemap.xml 200" in requests
    assert sum(1 for line in requests if "/bundle.json" in line) == RECORDS  # every record asked, once


def index_of(base: str, pages: int) -> str:
    entries = "".join(f"<sitemap><loc>{base}{RS}changelist-{n}.xml</loc></sitemap>\n" for n in range(pages))
    return (
        '<?xml version="1.0"?>\n<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:rs="http://www.openarchives.org/rs/terms/">\n<rs:md capability="changelist"/>\n'
        f"{entries}</sitemapindex>\n"
    )


def oversized(base: str, suffix: str) -> bytes:
    """A Change List past the size any page may be (32 MiB), never closed, as one that
    never ends is when cut there: its entries name a real record."""
    entry = f'<url><loc>{base}/pith/{suffix}/bundle.json</loc><rs:md change="updated" datetime="2099-01-01"/></url>\n'
    head = '<?xml version="1.0"?>\n<urlset xmlns:rs="http://www.openarchives.org/rs/terms/">\n'
    return (head + '<rs:md capability="changelist"/>\n').encode() + entry.encode() * (34 * 1024 * 1024 // len(entry))


@pytest.mark.slow
def test_change_lists_that_cannot_be_used_leave_the_sitemaps_to_name_the_changes(tmp_path, registry):
    """Week after week, a hostile ResourceSync document: another site's entries are
    ignored (that site never asked), and a list or index that cannot be read is given up
    with a warning naming why, for the sitemaps; no record is lost."""
    reg = registry(Weeks(changed=0.05, dates="honest"))
    reg.week(0)
    reg.crawl(tmp_path)
    elsewhere = socket.socket()
    elsewhere.bind(("127.0.0.1", 0))
    elsewhere.listen()
    elsewhere.setblocking(False)
    other = f"http://127.0.0.1:{elsewhere.getsockname()[1]}"

    reg.week(1)  # the registry's own list, and as many entries naming another site's records
    changed = changed_since_held(tmp_path, reg)
    own = (reg.root / "site" / RS.strip("/") / "changelist.xml").read_text()
    theirs = [line.replace(reg.base, other) for line in own.splitlines() if line.startswith("<url>")][:3]
    reg.write(f"{RS}changelist.xml", own.replace("</urlset>", "\n".join(theirs) + "\n</urlset>"))
    result, requests = reg.crawl(tmp_path)
    assert result.stat("changes_ignored") == 3 and result.stat("change_lists_unread") == 0
    assert fetched(requests) == changed and current(tmp_path / "archive") == reg.served()
    with pytest.raises(BlockingIOError):
        elsewhere.accept()  # another site's entries: never asked
    elsewhere.close()
    assert not any("sitemap" in line for line in requests)

    hostile = {
        2: (None, "no ResourceSync at "),
        3: (f"{RS}capabilitylist.xml", "is not a ResourceSync document"),
        4: (f"{RS}changelist.xml", "larger than download max size"),  # cut as a list that never ends is
        5: (f"{RS}changelist.xml", "more than 1000 Change Lists"),
        6: (f"{RS}changelist.xml", "a page of an index, is an index"),
    }
    for week, (path, said) in hostile.items():
        reg.week(week)
        if week == 2:
            (reg.root / "site" / ".well-known" / "resourcesync").unlink()
        elif week == 3:
            reg.write(path, "<html><body>Not here</body></html>")
        elif week == 4:
            reg.write(path, oversized(reg.base, sorted(reg.served())[0]))
        elif week == 5:
            reg.write(path, index_of(reg.base, 1001))
        else:
            reg.write(path, index_of(reg.base, 1))
            reg.write(f"{RS}changelist-0.xml", index_of(reg.base, 1))
        result, requests = reg.crawl(tmp_path)
        assert current(tmp_path / "archive") == reg.served(), week  # the sitemaps named every change
        assert "GET /sitemap.xml 200" in requests, week
        assert said in result.output, (week, result.output[-3000:])
        assert result.stat("change_lists_unread") == (week > 2), week
        assert not any("changelist-1" in line for line in requests)  # no page of a refused index read
        assert result.stat("change_lists_read") == 0
