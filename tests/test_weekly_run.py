"""A scheduled re-run costs what changed: a registry exported week by week as plain
files (the test kit's registry that changes), served by nginx, crawled from its
sitemap into one archive, week after week. Every request is counted in nginx's own
access log, and every record's current version is checked against the bundle the
registry serves that week."""

import hashlib
from pathlib import Path

import pytest

from crawler.scheduling.held_records import sample_size
from crawler.scheduling.listed_time import listed_date
from pith_testkit.static import export_site
from pith_testkit.virtual import VirtualCorpus
from pith_testkit.weeks import Weeks
from storage.serving.resolver import SiteOptions
from storage.serving.source import KEYRING_NAME
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

RECORDS = 2000


class Registry:
    """One registry's weeks, exported into one folder that nginx serves."""

    def __init__(self, root: Path, base: str, weeks: Weeks, resourcesync: bool = False):
        self.root, self.base, self.weeks, self.resourcesync = root, base, weeks, resourcesync

    def week(self, week: int) -> None:
        weeks = Weeks(week, self.weeks.changed, self.weeks.dates, self.weeks.lying)
        source = VirtualCorpus(RECORDS, 1, self.base, weeks=weeks, resourcesync=self.resourcesync)
        export_site(source, self.base, self.root / "site", SiteOptions())
        source.write_keyring(self.root / KEYRING_NAME)

    def served(self) -> dict[str, str]:
        """Each record's bundle as served now: suffix -> sha-256 of its bytes."""
        return {
            path.parent.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in (self.root / "site" / "pith").glob("*/bundle.json")
        }


def current(archive: Path) -> dict[str, str]:
    """Each record's current version in the archive: suffix -> sha-256 of its raw bytes."""
    best: dict[str, tuple] = {}
    for row in read_rows(archive, "records"):
        if str(row["accepted_as_current"]) == "False":
            continue
        suffix = row["pith_number"].rpartition(":")[2]
        order = (str(row["built_at"]), str(row["fetched_at"]))
        if suffix not in best or order > best[suffix][0]:
            best[suffix] = (order, row["raw_sha256"])
    return {suffix: sha for suffix, (_, sha) in best.items()}


@pytest.fixture
def registry(tmp_path, nginx):
    def make(weeks: Weeks, resourcesync: bool = False) -> tuple[Registry, Path]:
        log = tmp_path / "access.log"
        base = nginx(tmp_path / "registry" / "site", access_log=log)
        return Registry(tmp_path / "registry", base, weeks, resourcesync), log

    return make


def crawl(tmp_path, registry: Registry, log: Path, *args: str):
    log.write_text("")
    result = run_cli_crawl(
        tmp_path, *args, "sitemap", resolver=registry.base, out=tmp_path / "archive", corpus=registry.root
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result, log.read_text().splitlines()


@pytest.mark.slow
def test_a_week_with_honest_dates_costs_what_changed(tmp_path, registry):
    reg, log = registry(Weeks(changed=0.01, dates="honest"))
    reg.week(0)
    first, requests = crawl(tmp_path, reg, log)
    assert len(requests) == RECORDS + 4  # robots, the mirror list, the signing key, the sitemap: a first run
    assert current(tmp_path / "archive") == reg.served()

    reg.week(1)
    held = current(tmp_path / "archive")
    changed = {s for s, sha in reg.served().items() if held[s] != sha}
    assert len(changed) == RECORDS // 100
    second, requests = crawl(tmp_path, reg, log)
    assert current(tmp_path / "archive") == reg.served()  # every new version archived
    listing = sum(1 for line in requests if "/pith/" not in line)
    assert len(requests) <= 1.05 * len(changed) + 0.02 * RECORDS + listing + 10, len(requests)
    # every held record counted once: not asked, or asked for one reason
    skipped, sampled = second.stat("records_skipped_by_date"), second.stat("recheck_sample")
    assert second.stat("records_held") == RECORDS and second.stat("records_dated_changed") == len(changed)
    assert skipped + len(changed) + sampled + second.stat("recheck_due") + second.stat("records_swept") == RECORDS
    assert 0 < sampled <= 0.02 * RECORDS
    assert second.stat("records_found") == RECORDS - skipped  # each record asked found once
    assert second.stat("lastmod_distrusted") == 0
    assert (
        f"dates trusted: of 2000 held records, {skipped} not asked and {RECORDS - skipped} asked "
        f"({len(changed)} dated changed, {sampled} sampled, 0 due by --recheck-after, 0 swept)"
    ) in second.stdout
    fetched = {line.split("/")[2] for line in requests if line.endswith("/bundle.json 200")}
    assert fetched == changed  # the sample heard 304: nothing else was fetched whole
    assert "GET /.well-known/resourcesync 404" in requests  # no Change Lists: the sitemap was read
    assert "GET /sitemap.xml 200" in requests


@pytest.mark.slow
@pytest.mark.parametrize("dates", ["honest", "lying"])
def test_a_resolver_publishing_change_lists_is_read_by_them(tmp_path, registry, dates):
    """With ResourceSync, a re-run reads the Change Lists, not the sitemaps; records a
    lying Change List leaves out are found by the sample, and every record is then asked."""
    reg, log = registry(Weeks(changed=0.01 if dates == "honest" else 0.10, dates=dates), resourcesync=True)
    reg.week(0)
    crawl(tmp_path, reg, log)
    reg.week(1)
    held = current(tmp_path / "archive")
    changed = {s for s, sha in reg.served().items() if held[s] != sha}
    result, requests = crawl(tmp_path, reg, log)
    assert current(tmp_path / "archive") == reg.served()  # every new version archived
    listing = [line for line in requests if "/pith/" not in line]
    assert "GET /resourcesync/changelist.xml 200" in listing
    if dates == "honest":
        assert "GET /sitemap.xml 200" not in listing and result.stat("change_lists_read") == 1
        assert len(requests) <= 1.05 * len(changed) + 0.02 * RECORDS + len(listing) + 10, len(requests)
        assert result.stat("lastmod_distrusted") == 0
    else:
        assert result.stat("lastmod_distrusted") == 1 and "dates not trusted: " in result.stdout
        assert "GET /sitemap.xml 200" in listing  # every record asked, through the sitemap
        assert sum(1 for line in requests if "/bundle.json" in line) == RECORDS


@pytest.mark.slow
def test_lying_dates_cost_requests_never_a_record(tmp_path, registry):
    reg, log = registry(Weeks(changed=0.10, dates="lying"))
    reg.week(0)
    crawl(tmp_path, reg, log)
    reg.week(1)  # 10% changed; their sitemap dates stayed the dates of the version before
    lying, requests = crawl(tmp_path, reg, log)
    assert current(tmp_path / "archive") == reg.served()  # every changed record archived
    assert lying.stat("lastmod_distrusted") == 1
    assert lying.stat("lastmod_lies") >= 1
    assert "dates not trusted: " in lying.stdout
    assert sum(1 for line in requests if "/bundle.json" in line) == RECORDS  # every record asked again

    # the next run, nothing changed: the distrust is kept from the run before, so every
    # record is asked again (conditionally); that sweep finds the dates honest
    swept, requests = crawl(tmp_path, reg, log)
    assert swept.stat("lastmod_distrusted") == 1 and swept.stat("lastmod_lies") == 0
    assert sum(1 for line in requests if line.endswith("/bundle.json 304")) == RECORDS
    # and the run after trusts them again
    trusting, requests = crawl(tmp_path, reg, log)
    assert trusting.stat("lastmod_distrusted") == 0
    assert sum(1 for line in requests if "/bundle.json" in line) <= 0.02 * RECORDS


@pytest.mark.slow
def test_a_listing_without_dates_asks_every_record_as_before(tmp_path, registry):
    reg, log = registry(Weeks(changed=0.01, dates="none"))
    reg.week(0)
    crawl(tmp_path, reg, log)
    reg.week(1)
    result, requests = crawl(tmp_path, reg, log)
    assert current(tmp_path / "archive") == reg.served()
    assert sum(1 for line in requests if "/bundle.json" in line) == RECORDS
    assert result.stat("records_skipped_by_date") == 0


@pytest.mark.slow
def test_recheck_after_zero_asks_every_record(tmp_path, registry):
    reg, log = registry(Weeks(changed=0.01, dates="honest"))
    reg.week(0)
    crawl(tmp_path, reg, log)
    result, requests = crawl(tmp_path, reg, log, "--recheck-after", "0")
    assert sum(1 for line in requests if line.endswith("/bundle.json 304")) == RECORDS
    assert result.stat("recheck_due") + result.stat("recheck_sample") == RECORDS


def test_the_sample_covers_every_record_within_a_hundred_runs():
    for held in (1, 10, 160, 2000, 6400, 100_000, 1_500_000):
        size = sample_size(held)
        assert 1 <= size <= held and -(-held // size) <= 100  # every record within 100 runs
        assert size >= min(held, 64, max(10, 0.02 * held))
        assert size <= max(10, 0.02 * held) or size == -(-held // 100)  # a week's budget
    assert sample_size(160) == 10  # at most 10 more requests than the listings, where 2% is fewer
    assert sample_size(2000) == 40  # 2% of 2,000 (64 would pass a week's budget)
    assert sample_size(1_500_000) == 15_000  # every record within 100 runs


def test_listed_dates_are_read_as_days_or_moments():
    day, day_only = listed_date("2026-05-24")
    moment, precise = listed_date("2026-05-24T10:00:00Z")
    assert day_only and not precise and moment - day == 10 * 3600 * 1_000_000
    assert listed_date("yesterday") is None and listed_date(None) is None and listed_date("") is None
