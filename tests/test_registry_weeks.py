"""The test kit's registry that changes week by week (pith_testkit.weeks): each week's
new versions are signed by the corpus key and extend the week before; its sitemaps'
dates are honest, lying or absent as asked and answered conditionally; it publishes a
Change List a week when asked; and a week written as plain files serves from a static
server, the files of records that did not change left as they were."""

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from defusedxml import ElementTree

from pith.keyring import Keyring
from pith.verify import verify_bundle
from pith_testkit.virtual import VirtualCorpus
from pith_testkit.weeks import Weeks
from storage.publishing.resourcesync import RS_NS, SITEMAP_NS
from storage.serving.resolver import SiteOptions
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from tests.plugins.cli import run_cli
from tests.plugins.mirror import serve_process

RECORDS, SEED = 400, 4
NS = {"sm": SITEMAP_NS, "rs": RS_NS}
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def registry(week: int, **weeks) -> VirtualCorpus:
    return VirtualCorpus(RECORDS, SEED, weeks=Weeks(week, **weeks), resourcesync=True)


def get(url: str, **headers: str) -> tuple[int, bytes, dict]:
    try:
        with _DIRECT.open(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, b"", dict(exc.headers)


def listed_dates(url: str) -> dict[str, str | None]:
    """Each record of the sitemap pages, with its <lastmod>."""
    dates: dict[str, str | None] = {}
    top = ElementTree.fromstring(get(url + "/sitemap.xml")[1])
    pages = [ElementTree.fromstring(get(str(loc.text))[1]) for loc in top.findall("sm:sitemap/sm:loc", NS)]
    for page in pages or [top]:
        for entry in page.findall("sm:url", NS):
            lastmod = entry.find("sm:lastmod", NS)
            dates[str(entry.findtext("sm:loc", "", NS))[-26:]] = None if lastmod is None else lastmod.text
    return dates


def test_each_week_extends_the_week_before_with_versions_the_corpus_key_signed(tmp_path):
    before, after = registry(1), registry(2)
    after.write_keyring(tmp_path / "keyring.json")
    keyring = Keyring.build([tmp_path / "keyring.json"], default_keys=False)
    plan = after.catalog.plan
    assert [len(week) for week in plan.by_week] == [0, 4, 4]  # 1% of 400 a week
    assert plan.by_week[1] == before.catalog.plan.by_week[1]  # week 2 keeps week 1's changes
    for i in plan.by_week[2]:
        suffix = after.catalog.numbers[i][-26:]
        old, new = json.loads(before.bundle_bytes(suffix)), after.bundle_bytes(suffix)
        assert verify_bundle(new, keyring).ok
        bundle = json.loads(new)
        assert bundle["events"][: len(old["events"])] == old["events"] and len(bundle["events"]) > len(old["events"])
        assert bundle["built_at"] > old["built_at"] and bundle["built_at"] == after.catalog.entry(suffix).built_at
        assert registry(2).bundle_bytes(suffix) == new  # the same (seed, week), the same bytes
    unchanged = next(s for i, s in enumerate(after.catalog.suffixes) if i not in plan.changes)
    assert after.bundle_bytes(unchanged) == VirtualCorpus(RECORDS, SEED).bundle_bytes(unchanged)


@pytest.mark.parametrize(("dates", "lying"), [("honest", 1.0), ("lying", 1.0), ("lying", 0.5), ("none", 1.0)])
def test_sitemaps_tell_of_changes_as_asked(dates, lying):
    first, source = VirtualCorpus(RECORDS, SEED), registry(1, dates=dates, lying=lying)
    plan = source.catalog.plan
    with BackgroundMirror(MirrorServer(source, options=SiteOptions(sitemap_page_size=100))) as server:
        listed = listed_dates(server.url)
        index = ElementTree.fromstring(get(server.url + "/sitemap.xml")[1])
    assert len(listed) == RECORDS
    changed = {source.catalog.numbers[i][-26:]: plan.of(i)[-1] for i in plan.changes}
    if dates == "none":
        assert set(listed.values()) == {None} and index.find("sm:sitemap/sm:lastmod", NS) is None
        return
    told = {suffix for suffix, change in changed.items() if listed[suffix] == change.built_at[:10]}
    assert told == {suffix for suffix, change in changed.items() if change.listed}
    assert len(told) == {"honest": 4, "lying": {1.0: 0, 0.5: 2}[lying]}[dates]
    for suffix in set(changed) - told:  # its date stayed the first version's
        assert listed[suffix] == first.catalog.entry(suffix).built_at[:10] < changed[suffix].built_at[:10]
    pages = [listed_page for listed_page in index.findall("sm:sitemap", NS)]
    suffixes = list(source.catalog.suffixes)
    for n, page in enumerate(pages):
        assert page.findtext("sm:lastmod", None, NS) == max(str(listed[s]) for s in suffixes[n * 100 : (n + 1) * 100])


@pytest.mark.parametrize("dates", ["honest", "lying"])
def test_sitemap_pages_are_answered_304_until_what_they_list_changes(dates):
    with BackgroundMirror(MirrorServer(registry(1, dates=dates), options=SiteOptions(sitemap_page_size=100))) as server:
        pages = [f"{server.url}/sitemap-{n}.xml" for n in range(1, 5)]
        before = [get(page)[2] for page in pages]
        assert {get(page, **{"If-None-Match": h["ETag"]})[0] for page, h in zip(pages, before)} == {304}
        server.switch_to(registry(2, dates=dates))  # the registry a week later
        changed = {i // 100 for i in server.source.catalog.plan.by_week[2]}  # records are listed in order
        tagged = [get(page, **{"If-None-Match": h["ETag"]})[0] for page, h in zip(pages, before)]
        dated = [get(page, **{"If-Modified-Since": h["Last-Modified"]})[0] for page, h in zip(pages, before)]
    assert 0 < len(changed) < 4
    assert dated == [200 if n in changed else 304 for n in range(4)]  # its records' versions are newer
    if dates == "honest":
        assert tagged == dated
    else:  # what the pages list did not change: the same bytes as the week before
        assert tagged == [304] * 4


def change_list(url: str) -> list[tuple[str, str | None, str | None]]:
    """(record, change, datetime) of each entry of the Change List the Capability List names."""
    capabilities = ElementTree.fromstring(get(url + "/resourcesync/capabilitylist.xml")[1])
    loc = next(
        str(entry.findtext("sm:loc", "", NS))
        for entry in capabilities.findall("sm:url", NS)
        if entry.find("rs:md", NS).get("capability") == "changelist"
    )
    entries = ElementTree.fromstring(get(loc)[1]).findall("sm:url", NS)
    return [
        (
            str(e.findtext("sm:loc", "", NS))[-38:-12],
            e.find("rs:md", NS).get("change"),
            e.find("rs:md", NS).get("datetime"),
        )
        for e in entries
    ]


@pytest.mark.slow
def test_serve_virtual_week_publishes_a_change_list_a_week(tmp_path):
    options = ["--virtual", str(RECORDS), "--seed", str(SEED), "--week", "2", "--changed-per-week", "1%"]
    source = registry(2)
    with serve_process(*options, "--resourcesync", kit=True) as (_, url):
        honest = change_list(url)
        assert get(url + "/.well-known/resourcesync")[0] == 200
    with serve_process(*options, "--resourcesync", "--dates", "lying", "--lying-share", "50%", kit=True) as (_, url):
        lying = change_list(url)
    with serve_process(*options, kit=True) as (_, url):
        assert get(url + "/.well-known/resourcesync")[0] == 404
    numbers, plan = source.catalog.numbers, source.catalog.plan
    expected = [numbers[i][-26:] for week in (1, 2) for i in plan.by_week[week]]
    assert [record for record, _, _ in honest] == expected
    assert {change for _, change, _ in honest} == {"updated"}
    stamps = [stamp for _, _, stamp in honest]
    assert stamps == sorted(stamps)
    lying_plan = registry(2, dates="lying", lying=0.5).catalog.plan
    told = [numbers[i][-26:] for week in (1, 2) for i in lying_plan.by_week[week] if told_in(lying_plan, i, week)]
    assert [record for record, _, _ in lying] == told
    assert 0 < len(told) < len(expected)


def told_in(plan, index: int, week: int) -> bool:
    return next(change for change in plan.of(index) if change.week == week).listed


def test_registry_options_go_with_virtual(tmp_path):
    alone = run_cli("serve", str(tmp_path), "--week", "3", kit=True)
    assert alone.returncode == 2 and "--week and its options goes with --virtual N" in alone.output
    share = run_cli("serve", "--virtual", "10", "--changed-per-week", "150%", kit=True)
    assert share.returncode == 2 and "not between 0% and 100%" in share.output


@pytest.mark.slow
def test_a_week_written_as_files_serves_from_a_static_server(tmp_path):
    out, site = tmp_path / "registry", tmp_path / "registry" / "site"
    site.mkdir(parents=True)
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(site)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        port = int(re.search(r"port (\d+)", server.stdout.readline()).group(1))
        base = f"http://127.0.0.1:{port}"
        args = ["corpus", "week", "--records", "60", "--seed", str(SEED), "--base-url", base, "--out", str(out)]
        first = run_cli(*args, "--week", "1", "--changed-per-week", "5%", "--resourcesync", kit=True)
        assert first.returncode == 0, first.output
        bundles = {p.parent.name: p.stat().st_mtime for p in site.glob("pith/*/bundle.json")}
        assert len(bundles) == 60
        status, body, headers = get(f"{base}/pith/{next(iter(bundles))}/bundle.json")
        assert status == 200
        keyring = Keyring.build([out / "keyring.json"], default_keys=False)
        assert verify_bundle(body, keyring).ok
        assert (
            get(f"{base}/pith/{next(iter(bundles))}/bundle.json", **{"If-Modified-Since": headers["Last-Modified"]})[0]
            == 304
        )
        assert len(listed_dates(base)) == 60 and get(base + "/resourcesync/changelist.xml")[0] == 200
        second = run_cli(*args, "--week", "2", "--changed-per-week", "5%", "--resourcesync", kit=True)
        assert second.returncode == 0, second.output
        changed = {VirtualCorpus(60, SEED).catalog.numbers[i][-26:] for i in registry_plan(60, 2).by_week[2]}
        rewritten = {
            p.parent.name for p in site.glob("pith/*/bundle.json") if p.stat().st_mtime != bundles[p.parent.name]
        }
        assert rewritten == changed and len(changed) == 3
    finally:
        server.terminate()
        server.wait()


def registry_plan(records: int, week: int):
    return VirtualCorpus(records, SEED, weeks=Weeks(week, 0.05)).catalog.plan
