"""A scheduled re-run against sources that lie about time, and a clock that lied once:
a registry whose listings say what each test scripts (pith_testkit.scripted), served by
nginx and crawled into one archive with the machine's clock set by libfaketime. Whatever
the dates say, a change costs requests at most, never a record: a lie found is acted on
in the same run, and a date or stamp past the clock counts as none."""

import gzip
import json
import random
import shutil
from datetime import timedelta

import pytest

from pith_testkit.scripted import Listing
from tests.plugins.cli import run_cli
from tests.plugins.scripted_site import START, Site

pytestmark = pytest.mark.slow


def bundles(requests: list[str]) -> int:
    return sum(1 for line in requests if "/bundle.json" in line)


@pytest.mark.parametrize("record_dates", ["frozen", "honest"])
def test_frozen_index_dates_hide_no_change(tmp_path, nginx, record_dates):
    """The index's dates never move (and, frozen, the records' neither) while 10% of the
    records change: the child sitemaps are not read, so the changes are silent. The
    sample finds some, and that silence is a lie acted on in the same run: every listing
    read and every record asked, every change archived, the summary saying so."""
    site = Site(tmp_path, nginx, 600)
    reg = site.registry
    reg.publish(Listing(), START)
    site.crawl(START)
    assert not site.pending()

    changed = random.Random(7).sample(reg.suffixes, 60)
    found_by_sample = site.sampled(changed)
    assert found_by_sample and len(found_by_sample) < len(changed)  # the run can detect it; most hide
    week = START + timedelta(days=7)
    for suffix in changed:
        reg.change(suffix, week - timedelta(days=1))
    reg.publish(Listing(record_dates=record_dates, index_dates="frozen"), week)
    result, requests = site.crawl(week)
    assert not site.pending()  # every change archived in this run, not 30 days later
    assert result.stat("lastmod_distrusted") == 1 and result.stat("lastmod_lies") >= len(found_by_sample)
    assert "dates not trusted: " in result.stdout
    assert bundles(requests) == len(reg.suffixes)  # every record asked, once
    assert sum(1 for line in requests if "/sitemap-" in line) == 4  # every child read, after all
    held = result.stat("records_held")
    assert held == 600 and result.stat("records_skipped_by_date") == 0
    asked = ("records_dated_changed", "recheck_sample", "recheck_due", "records_swept")
    assert sum(result.stat(key) for key in asked) == held


def test_a_fast_clock_once_delays_no_change_past_recheck_after(tmp_path, nginx):
    """One run with the clock four years fast confirms records in the future. The next
    run, at the right time, takes those confirmations as due: changes whose dates did
    not move are archived then, well within --recheck-after, and the run after is cheap."""
    site = Site(tmp_path, nginx, 300)
    reg = site.registry
    reg.publish(Listing(), START)
    site.crawl(START)
    fast, _ = site.crawl(START + timedelta(days=7 + 4 * 365))  # every record due: asked, confirmed in 2030
    assert fast.stat("recheck_due") + fast.stat("recheck_sample") == 300

    changed = random.Random(3).sample(reg.suffixes, 4)
    for suffix in changed:
        reg.change(suffix, START + timedelta(days=8), told=False)  # the listings never say
    reg.publish(Listing(), START + timedelta(days=8))
    result, requests = site.crawl(START + timedelta(days=14))
    assert not site.pending()  # 4 of 4 archived, 7 days after the change
    assert result.stat("recheck_due") + result.stat("recheck_sample") == 300  # confirmed later than the clock: due
    assert result.stat("lastmod_distrusted") == 1  # their dates did not move: a lie
    swept, _ = site.crawl(START + timedelta(days=21))  # the run after a lie asks every record, and finds none
    assert swept.stat("records_swept") > 0 and swept.stat("lastmod_lies") == 0
    calm, requests = site.crawl(START + timedelta(days=28))
    assert calm.stat("recheck_due") == 0 and calm.stat("lastmod_distrusted") == 0
    assert bundles(requests) <= 0.02 * 300 + 10


def test_future_dates_count_as_none_and_are_never_kept(tmp_path, nginx):
    """Every <lastmod> in 9999 and the index's too: each record is asked as one listed
    without a date, the dates are counted and named, and none is kept: the next run,
    with honest dates, asks only what changed."""
    site = Site(tmp_path, nginx, 200, pages=2)
    reg = site.registry
    reg.publish(Listing(), START)
    site.crawl(START)
    reg.publish(Listing(record_dates="future", index_dates="future"), START + timedelta(days=7))
    future, requests = site.crawl(START + timedelta(days=7))
    assert future.stat("dates_in_future") == 200 + 2 and bundles(requests) == 200
    assert "dates in the future: 202 dates the resolver gave were later than this machine's clock" in future.stdout
    assert all(date is None or date < "9999" for date in site.state("freshness.json")["sitemaps"].values())

    changed = reg.suffixes[:3]
    for suffix in changed:
        reg.change(suffix, START + timedelta(days=13))
    reg.publish(Listing(), START + timedelta(days=14))
    honest, requests = site.crawl(START + timedelta(days=14))
    assert not site.pending() and honest.stat("dates_in_future") == 0
    assert honest.stat("records_dated_changed") == 3
    assert bundles(requests) <= 3 + 0.02 * 200 + 10


def test_a_future_dated_change_list_entry_never_stops_the_lists(tmp_path, nginx):
    """A Change List entry dated 9999-12-31 is asked (as an entry without a date) and
    never kept as how far the lists were read: the weeks after still read them and
    archive every change they name. A position kept in the future by an older run heals."""
    site = Site(tmp_path, nginx, 300)
    reg = site.registry
    listing = Listing(change_lists=True)
    reg.publish(listing, START)
    site.crawl(START)
    reg.change(reg.suffixes[0], START + timedelta(days=6))
    reg.publish(Listing(change_lists=True, change_dates="future"), START + timedelta(days=7))
    result, requests = site.crawl(START + timedelta(days=7))
    assert not site.pending() and result.stat("dates_in_future") >= 1
    assert "9999" not in json.dumps(site.state("freshness.json")["read_to"])  # the future is never a position

    state = site.state("freshness.json")  # as a run before dates were bounded left it
    state["read_to"] = {site.base: "9999-12-31T00:00:00Z"}
    (path,) = tmp_path.rglob("freshness.json")
    path.write_text(json.dumps(state))
    changed = reg.suffixes[10:35]
    for suffix in changed:
        reg.change(suffix, START + timedelta(days=13))
    reg.publish(listing, START + timedelta(days=14))
    result, requests = site.crawl(START + timedelta(days=14))
    assert not site.pending()  # 25 of 25 archived
    # every page read again (the position healed): the 25 named, and week 1's entry still
    # dated in the future, asked as an entry without a date
    assert result.stat("change_lists_read") == 3 and result.stat("records_dated_changed") == 25 + 1
    assert result.stat("lastmod_distrusted") == 0
    assert site.state("freshness.json")["read_to"][site.base] < "9999"


def test_gzipped_sitemaps_are_read_within_a_cap(tmp_path, nginx):
    """Child sitemaps as .xml.gz are read like plain ones; one that inflates past 50 MB
    or is cut short is named in a warning and counted as a sitemap that failed (the
    records they list are still reached here, through the bundles' citations)."""
    site = Site(tmp_path, nginx, 120, pages=3)
    reg = site.registry
    reg.publish(Listing(gzip=True), START)
    result, requests = site.crawl(START)
    assert not site.pending() and result.stat("records_found") == 120
    assert sum(1 for line in requests if ".xml.gz 200" in line) == 3

    (reg.root / "sitemap-2.xml.gz").write_bytes(gzip.compress(b"<urlset>" + b" " * (60 * 1024 * 1024)))
    cut = gzip.compress(b"<urlset>" + b"<url><loc>x</loc></url>" * 10_000)
    (reg.root / "sitemap-3.xml.gz").write_bytes(cut[: len(cut) // 2])
    shutil.rmtree(site.archive)
    result, _ = site.crawl(START, "--max-failures", "5", status=3)
    assert result.stat("discovery_failures/sitemap_unreadable") == 2
    assert "sitemap-2.xml.gz not read: larger than 50 MB decompressed" in result.stderr
    assert "sitemap-3.xml.gz not read: gzip cut short" in result.stderr
    assert "fetch failures: sitemap_unreadable 2" in result.stdout


def test_an_archive_written_by_runs_whose_clocks_disagree_audits_clean(tmp_path, nginx):
    """Runs commit in the order they ran, whatever their clocks stamp: one four years
    fast, then one right, then one a year slow, each archiving new versions. The
    archive's transparency log and attestation chain still hold together."""
    site = Site(tmp_path, nginx, 60, pages=1)
    reg = site.registry
    reg.publish(Listing(), START)
    site.crawl(START)
    for week, offset in ((1, timedelta(days=4 * 365)), (2, timedelta(0)), (3, timedelta(days=-365))):
        for suffix in reg.suffixes[week * 3 : week * 3 + 3]:
            reg.change(suffix, START + timedelta(days=7 * week - 1))
        reg.publish(Listing(), START + timedelta(days=7 * week))
        site.crawl(START + timedelta(days=7 * week) + offset)
        assert not site.pending()
    audit = run_cli("audit", site.archive, "--keyring", reg.keyring, home=tmp_path)
    assert audit.returncode == 0, audit.output[-3000:]
