"""The shared Redis frontier: tasks as JSON data (never pickle, never requests), shared claims, tasks
that are taken once and come back when their worker dies, and real crawls of one
mirror by two workers into one archive, one of them killed mid-run."""

import json
import os
import pickle
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import scrapy
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

import crawler.frontier as frontier_package
from crawler.crawl_config import CrawlConfig
from crawler.frontier import (
    Frontier,
    FrontierError,
    RefusedEntry,
    RequestNotSerializable,
    SigningKeyInUse,
    connect,
    frontier_settings,
    serializer,
)
from crawler.frontier.client import worker_id
from crawler.links import ResolverUrls
from crawler.scheduling.claims import CLAIMED, FULL, SEEN
from crawler.seeds import SeedList
from crawler.spiders.pith import PithSpider
from crawler.worker import worker_name
from pith.keyring import Keyring
from pith.signing import Signer
from pith_archiver.crawl.run import project_settings
from pith_testkit.faults import FaultPlan
from storage.archive.folder_store import LocalStore
from storage.archive.layout import check_run_id, new_run_id
from storage.archive.manifest import committed_manifests
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home, run_cli, signing_key
from tests.plugins.redis import start_redis
from tests.plugins.tables import read_rows

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"


# --- tasks, not requests -----------------------------------------------------------------


def spider_tasks() -> tuple[PithSpider, list[scrapy.Request]]:
    """Every kind of request the spider queues in a shared frontier as a task."""
    config = CrawlConfig(SeedList(["1904.12043", "sitemap"]), "http://127.0.0.1:1", mirrors=("http://127.0.0.1:2/m",))
    spider = PithSpider(config)
    spider.crawler = get_crawler(PithSpider)  # a record's opening is signalled (crawler.extensions.record_ledger)
    requests = [
        *spider.seed_requests(),
        spider.bundle_request(spider.resolver.base, REAL, 3),
        spider.alias_request("RLLQL635", 1),  # a record page continues its bundle's task: no task of its own
        spider.sitemap_request("http://127.0.0.1:2/m/sitemap-3.xml"),
    ]
    return spider, requests


def test_every_task_the_spider_queues_is_rebuilt_by_the_worker_as_it_was():
    spider, requests = spider_tasks()
    assert {r.callback.__name__ for r in requests} == {"parse_bundle", "parse_page", "parse_sitemap"}
    for request in requests:
        data = serializer.dumps(serializer.task_of(request, spider.sources))
        entry = json.loads(data)
        assert set(entry) <= {"kind", "suffix", "alias", "depth", "base", "path"}  # names, never a request
        back, sent = spider.task_request(serializer.loads(data)).to_dict(spider=spider), request.to_dict(spider=spider)
        if request.callback.__name__ == "parse_bundle":  # each worker picks its source (crawler.downloading.spread)
            sources = {base: ResolverUrls(base).url("bundle_url", entry["suffix"]) for base in spider.sources}
            assert back["url"] == sources[back["meta"].pop("pith_tried")[-1]]
            del back["url"], sent["url"], sent["meta"]["pith_tried"]  # and whether it is retried there:
            del back["meta"]["dont_retry"], sent["meta"]["dont_retry"]  # a mirror falls back instead
        assert back == sent


def test_a_sitemap_on_none_of_the_crawls_resolvers_is_no_task():
    spider, _ = spider_tasks()
    with pytest.raises(RequestNotSerializable, match="none of the crawl's resolvers"):
        serializer.task_of(spider.sitemap_request("http://127.0.0.1:3/sitemap.xml"), spider.sources)


@pytest.mark.parametrize(
    "entry, reason",
    [
        (pickle.dumps({"url": "http://127.0.0.1:1/"}), "not_json"),
        (b'{"url": "http://127.0.0.1:1/", "_class": "os.system"}', "unknown_field"),
        (b'{"kind": "page", "suffix": "' + REAL.encode() + b'", "depth": 0, "callback": "__init__"}', "unknown_field"),
        (b'{"kind": "page", "suffix": "' + REAL.encode() + b'\\n", "depth": 0}', "bad_suffix"),
        (b'{"kind": "sitemap", "base": "http://127.0.0.1:1", "path": "/s.xml", "depth": 0}', "unknown_field"),
        (b'{"kind": ["bundle"]}', "unknown_kind"),
        (b'{"kind": "bundle", "suffix": "' + REAL.encode() + b'", "depth": 1e3}', "wrong_type"),
    ],
)
def test_what_redis_holds_is_checked_before_it_becomes_a_request(entry, reason):
    with pytest.raises(RefusedEntry) as refused:
        serializer.loads(entry)
    assert refused.value.reason == reason and str(refused.value).startswith(reason + ": ")


# --- settings -----------------------------------------------------------------------------


def test_a_redis_url_becomes_scrapy_redis_settings_with_our_serializer():
    settings = frontier_settings("redis://10.0.0.5:6380/3", key="crawl-2026")
    assert settings["REDIS_URL"] == "redis://10.0.0.5:6380/3"
    assert settings["SCHEDULER"] == "crawler.frontier.FrontierScheduler"
    assert settings["SCHEDULER_SERIALIZER"] == "crawler.frontier.serializer"
    assert settings["DUPEFILTER_CLASS"] == "scrapy_redis.dupefilter.RFPDupeFilter"
    assert settings["SCHEDULER_QUEUE_KEY"] == "crawl-2026:requests"
    assert settings["SCHEDULER_PERSIST"] is True


@pytest.mark.parametrize(
    "url",
    [
        "",
        "http://127.0.0.1:6379/0",
        "redis://127.0.0.1:6379/zero",
        "redis://127.0.0.1:99999/0",
        "redis:///0",
        "unix://",
    ],
)
def test_what_is_not_a_redis_url_is_refused(url):
    with pytest.raises(FrontierError, match="not a Redis URL"):
        frontier_settings(url)


def test_a_bad_key_is_refused():
    with pytest.raises(FrontierError, match="frontier key"):
        frontier_settings("redis://127.0.0.1/0", key="a%(spider)s")


def test_the_project_turns_pith_frontier_into_those_settings():
    settings = project_settings({"PITH_FRONTIER": "redis://127.0.0.1:6379/2", "PITH_FRONTIER_KEY": "c1"})
    for addon in build_component_list(settings["ADDONS"]):
        load_object(addon)().update_settings(settings)
    assert settings["SCHEDULER"] == "crawler.frontier.FrontierScheduler"
    assert (settings["REDIS_URL"], settings["SCHEDULER_DUPEFILTER_KEY"]) == (
        "redis://127.0.0.1:6379/2",
        "c1:dupefilter",
    )


def test_the_redis_scripts_ship_with_the_package():
    """A non-editable install holds only the data files pyproject.toml names."""
    package = Path(frontier_package.__file__).parent
    globs = tomllib.loads((package.parents[1] / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["crawler.frontier"]
    scripts = set((package / "lua").iterdir())
    assert len(scripts) == 11 and {path for glob in globs for path in package.glob(glob)} == scripts


@pytest.mark.parametrize("name", ["crawl-1", "café 2", "w|x:y", "a" * 100])
def test_one_worker_name_fits_run_ids_and_the_frontiers_keys(name):
    named = worker_name(name)
    assert check_run_id(new_run_id(named))  # storage's rule: 1-64 of [A-Za-z0-9_.]
    assert worker_id(name).startswith(named[:48] + ".") and "|" not in worker_id(name)


@pytest.mark.parametrize(
    "args, code, said",
    [
        (["--frontier", "http://127.0.0.1:6379/0"], 2, "not a Redis URL"),
        (["--frontier", "redis://127.0.0.1:6379/0", "--jobdir", "job"], 2, "--jobdir"),
    ],
)
def test_crawl_refuses_a_frontier_it_cannot_use(tmp_path, args, code, said):
    result = run_cli("crawl", "--resolver", "http://127.0.0.1:1", "--out", str(tmp_path), *args, REAL)
    assert (result.returncode, said in result.output) == (code, True), result.output


def test_crawl_says_when_the_frontier_is_unreachable(tmp_path, refused_port):
    result = run_cli(
        "crawl",
        "--resolver",
        "http://127.0.0.1:1",
        "--out",
        str(tmp_path),
        "--frontier",
        f"redis://127.0.0.1:{refused_port}/0",
        REAL,
    )
    assert result.returncode == 2 and "cannot reach the frontier" in result.output, result.output
    assert result.output.count("\n") == 1  # one line, before the crawl starts


def test_an_unreachable_frontier_is_a_named_error(refused_port):
    with pytest.raises(FrontierError, match="cannot reach the frontier"):
        connect(f"redis://127.0.0.1:{refused_port}/0", {"socket_connect_timeout": 2})


# --- the ledger -----------------------------------------------------------------------------


def workers(redis_url, *names, lease=30.0) -> list[Frontier]:
    return [Frontier(connect(redis_url), "t", name, lease) for name in names]


def test_a_record_is_claimed_by_the_first_worker_only(redis_url):
    a, b = workers(redis_url, "a", "b")
    other, third = "A" * 26, "B" * 26
    assert a.claim([REAL, REAL], 0, page=True) == [(REAL, CLAIMED)]
    assert b.claim([other, REAL], 0, page=True) == [(other, CLAIMED), (REAL, SEEN)]
    assert a.claim([REAL, other, third], 1, page=False, limit=2) == [(REAL, SEEN), (other, SEEN), (third, FULL)]


def test_a_commit_noted_while_a_worker_reads_the_archive_is_not_taken_for_a_lost_one(redis_url):
    """A worker notes its commit after writing the manifest; another, opening meanwhile,
    may read the archive before that manifest is written. Only the commits noted before
    it read are checked: else the crawl would be forgotten and every record done twice."""
    a, b, c, d = workers(redis_url, "a", "b", "c", "d")
    a.claim([REAL], 0, page=False)
    a.note_commit("run-1")
    b.remember_commits()  # b opens: then reads the archive, which holds run-1 only
    a.note_commit("run-2")  # a commits meanwhile: its manifest came after b's read
    b.check(frozenset({"run-1"}))
    assert c.claim([REAL], 0, page=False) == [(REAL, SEEN)]  # a's claims stand
    b.check(frozenset())  # an archive that lost run-1, which was noted before b read
    assert d.claim([REAL], 0, page=False) == [(REAL, CLAIMED)]  # the crawl is forgotten: claimable again


def test_a_task_is_taken_once_however_often_it_is_queued(redis_url):
    a, b = workers(redis_url, "a", "b")
    for x in (a, b):
        x.heartbeat()
    a.claim([REAL], 0, page=False)
    bundle = f"b:{REAL}"
    assert a.push([(bundle, b'{"copy": 1}', -20, None), (bundle, b'{"copy": 2}', -20, None)], "t:dupefilter") == 2
    assert b.pop(8) == [(bundle, b'{"copy": 1}')]  # b holds it: the second copy is dropped
    assert a.pop(8) == [] and b.pop(8) == []
    assert a.drain() == (0, 2, 0)  # nothing queued, both busy, none dead
    assert b.release([bundle]) == 1
    a.push([(bundle, b'{"copy": 3}', -20, None)], "t:dupefilter")
    assert a.pop(8) == []  # done and committed: a stale copy


def test_requests_pass_the_shared_duplicate_filter_as_they_are_queued(redis_url):
    a, b = workers(redis_url, "a", "b")
    sitemap = ("sitemap:http://127.0.0.1:1/sitemap.xml", b'{"url": "sitemap"}', -5, "f1")
    assert a.push([sitemap], "t:dupefilter") == 1
    assert b.push([sitemap], "t:dupefilter") == 0  # the second worker's seed is a duplicate
    assert b.pop(8) == [sitemap[:2]] and b.pop(8) == []


def test_the_tasks_of_a_worker_that_stopped_go_to_a_survivor(redis_url):
    a, b = workers(redis_url, "a", "b")
    for x in (a, b):
        x.heartbeat()
    a.claim([REAL], 4, page=True)
    sitemap = "sitemap:http://127.0.0.1:1/sitemap.xml"
    a.push([(sitemap, b'{"url": "sitemap"}', -30, "f1"), (f"p:{REAL}", b'{"url": "page"}', -10, None)], "t:df")
    assert a.pop(1) == [(sitemap, b'{"url": "sitemap"}')]
    assert b.recover() == []  # a is alive: nothing to take
    assert a.leave() == 3  # the sitemap it holds, the bundle and page it claimed
    assert dict(b.recover()) == {f"b:{REAL}": b"4", f"p:{REAL}": b"4", sitemap: b'{"url": "sitemap"}'}
    assert b.drain() == (1, 1, 0)  # a is gone; the page it queued is still there
    assert b.pop(8) == [(f"p:{REAL}", b'{"url": "page"}')]


def test_a_lapsed_lease_is_a_dead_worker(redis_url):
    a, b = workers(redis_url, "a", "b", lease=0.05)
    a.heartbeat()
    a.claim([REAL], 0, page=False)
    time.sleep(0.2)  # a renews nothing: its lease lapses
    assert b.recover() == [(f"b:{REAL}", b"0")]
    assert b.drain() == (0, 0, 0)


def test_one_signing_key_serves_one_live_worker(redis_url):
    a, b = workers(redis_url, "a", "b", lease=0.2)
    a.sign_as("key-1")
    a.sign_as("key-1")  # its own again: fine
    b.sign_as("key-2")
    with pytest.raises(SigningKeyInUse, match="in use by the live worker a"):
        b.sign_as("key-1")
    a.leave()
    b.sign_as("key-1")  # a left: the key is free
    time.sleep(0.3)  # b's lease lapses: it is dead
    a.sign_as("key-1")


# --- real crawls: two workers, one mirror, one archive ------------------------------------

# few requests in flight per worker: a worker holds the tasks it has queued for download, and
# with about one request per record a worker holding 32 would leave the other little to take
SETTINGS = [
    "-s",
    "AUTOTHROTTLE_ENABLED=false",
    "-s",
    "CONCURRENT_REQUESTS_PER_DOMAIN=2",
    "-s",
    "CONCURRENT_REQUESTS=4",
    "-s",
    "PITH_FRONTIER_IDLE_CLOSE=1",
    "-s",
    "PITH_FRONTIER_LEASE=2",
    "-s",
    "PITH_FRONTIER_POLL=0.1",
]


def start_worker(tmp_path: Path, name: str, server, corpus_dir, redis_url, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "pith_archiver",
        "crawl",
        "-v",
        "--resolver",
        server.url,
        "--no-default-keys",
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--out",
        str(tmp_path / "archive"),
        "--frontier",
        redis_url,
        "--worker",
        name,
        "--signing-key",
        str(signing_key(tmp_path / f"{name}.key")),
        "--progress",
        "off",
        "--stats-json",
        str(tmp_path / f"{name}.json"),
        *SETTINGS,
        "-s",
        f"USER_AGENT=worker-{name}",
        *extra,
        REAL,
    ]
    log = (tmp_path / f"{name}.log").open("w")
    return subprocess.Popen(
        command, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **isolated_home(tmp_path)}
    )


def finish(process: subprocess.Popen, tmp_path: Path, name: str) -> dict:
    assert process.wait(timeout=90) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
    return json.loads((tmp_path / f"{name}.json").read_text())


def committed_records(tmp_path: Path, *names: str) -> dict[str, list[str]]:
    """Worker -> the Pith numbers of the records tables its committed manifests list."""
    keyring = Keyring([Signer.load(tmp_path / f"{name}.key").pinned() for name in names])
    store = LocalStore(tmp_path / "archive")
    found: dict[str, list[str]] = {}
    for manifest in committed_manifests(store, keyring):
        rows = read_rows(store, "records", columns=["pith_number"], manifest=manifest)
        found.setdefault(manifest["worker"], []).extend(row["pith_number"] for row in rows)
    return found


def bundles_served(server, name: str) -> int:
    return sum(
        r.document == "bundle" and r.status == 200 and r.headers.get("user-agent") == f"worker-{name}"
        for r in server.requests
    )


def test_two_workers_share_one_crawl_and_archive_every_record_once(
    tmp_path, corpus_dir, corpus_catalog, mirror, redis_url
):
    # slow answers (a record costs one request) keep the first worker busy while the second starts
    server = mirror(faults=FaultPlan(latency_ms=180))
    processes = {name: start_worker(tmp_path, name, server, corpus_dir, redis_url) for name in ("a", "b")}
    stats = {name: finish(process, tmp_path, name) for name, process in processes.items()}

    every = sorted(corpus_catalog.entry(s).pith_number for s in corpus_catalog.suffixes)
    by_worker = committed_records(tmp_path, "a", "b")
    assert sorted(by_worker["a"] + by_worker["b"]) == every  # all of them, each once
    assert all(stats[name]["pith/archived"] == len(by_worker[name]) > 0 for name in "ab")
    assert sum(stats[name].get("pith/records_found", 0) for name in "ab") == len(every)
    assert bundles_served(server, "a") + bundles_served(server, "b") == len(every)  # none fetched twice
    assert connect(redis_url).hlen("pith:owner") == 0  # every task done and released


def wait_for(condition, *running: subprocess.Popen, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline and all(p.poll() is None for p in running), (
            "the crawl ended before both workers got going"
        )
        time.sleep(0.02)


def test_a_worker_killed_mid_run_loses_nothing(tmp_path, corpus_dir, corpus_catalog, mirror, redis_url):
    # Slow answers and a head start for the doomed worker: however loaded the machine,
    # it has archived some records and the survivor has started before the kill.
    server = mirror(faults=FaultPlan(latency_ms=600))
    doomed = start_worker(tmp_path, "doomed", server, corpus_dir, redis_url)
    wait_for(lambda: bundles_served(server, "doomed") >= 5, doomed)
    survivor = start_worker(tmp_path, "survivor", server, corpus_dir, redis_url)
    wait_for(lambda: bundles_served(server, "survivor") >= 3, doomed, survivor)
    doomed.send_signal(signal.SIGKILL)  # no commit, no goodbye: its tasks are held by nobody alive
    doomed.wait()
    stats = finish(survivor, tmp_path, "survivor")

    every = sorted(corpus_catalog.entry(s).pith_number for s in corpus_catalog.suffixes)
    by_worker = committed_records(tmp_path, "doomed", "survivor")
    assert list(by_worker) == ["survivor"]  # the killed worker committed nothing
    assert sorted(by_worker["survivor"]) == every  # yet every record is there, once
    assert stats["pith/frontier_recovered"] >= 5  # at least what it had archived
    assert bundles_served(server, "doomed") >= 5


def test_what_a_killed_worker_committed_is_not_archived_again(tmp_path, corpus_dir, corpus_catalog, mirror, redis_url):
    """The dead worker's tasks all go back to the queue, those its interim commits committed
    too: the survivor reads those manifests first, so each record is still listed once."""
    server = mirror(faults=FaultPlan(latency_ms=600))
    trusted = []  # each worker counts what the other committed (--archive-keyring)
    for name in ("doomed", "survivor"):
        signer = Signer.generate(f"worker-{name}")
        signer.save(tmp_path / f"{name}.key")
        trusted += ["--archive-keyring", str(tmp_path / f"{name}.pub.json")]
        (tmp_path / f"{name}.pub.json").write_text(json.dumps(signer.public_document()))
    doomed = start_worker(tmp_path, "doomed", server, corpus_dir, redis_url, "--commit-every", "4", *trusted)
    manifests = tmp_path / "archive" / "manifests"
    wait_for(lambda: any(manifests.glob("*-doomed-*.json")), doomed)
    survivor = start_worker(tmp_path, "survivor", server, corpus_dir, redis_url, *trusted)
    wait_for(lambda: bundles_served(server, "survivor") >= 3, doomed, survivor)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    stats = finish(survivor, tmp_path, "survivor")

    every = sorted(corpus_catalog.entry(s).pith_number for s in corpus_catalog.suffixes)
    by_worker = committed_records(tmp_path, "doomed", "survivor")
    assert len(by_worker["doomed"]) >= 4  # its interim commits survived it
    assert sorted(by_worker["doomed"] + by_worker["survivor"]) == every  # each record once in the union
    assert stats["pith/frontier_recovered"] >= len(by_worker["doomed"])
    # not stored again: unchanged since its interim commit committed it (their validators
    # were kept then), or fetched again and found archived
    redone = stats.get("pith/not_modified", 0) + stats.get("pith/already_archived", 0)
    assert redone >= len(by_worker["doomed"])


def test_a_second_worker_with_the_same_key_is_refused(tmp_path, corpus_dir, mirror, redis_url):
    # slow answers keep the first worker alive (~20 s of crawl) while the second starts
    server = mirror(faults=FaultPlan(latency_ms=300))
    first = start_worker(tmp_path, "first", server, corpus_dir, redis_url)
    wait_for(lambda: bundles_served(server, "first") >= 1, first)
    (tmp_path / "second.key").write_bytes((tmp_path / "first.key").read_bytes())  # the same key
    second = start_worker(tmp_path, "second", server, corpus_dir, redis_url)
    assert second.wait(timeout=60) == 2  # a configuration error: refused before it starts
    said = (tmp_path / "second.log").read_text()
    assert "in use by the live worker first." in said and "Traceback" not in said
    assert not list((tmp_path / "archive" / "manifests").glob("*-second-*"))  # it committed nothing
    assert bundles_served(server, "second") == 0
    assert first.poll() is None  # the refusal was made while the first was alive
    first.kill()
    first.wait()


@pytest.mark.slow
def test_a_worker_whose_frontier_is_gone_stops_and_commits_what_it_archived(tmp_path, corpus_dir, mirror):
    """An unattended worker must not wait forever on a Redis that died: it retries for
    PITH_FRONTIER_UNREACHABLE_MAX seconds, then stops, commits and exits FAILED."""
    redis_process, redis_url = start_redis(tmp_path)
    server = mirror(faults=FaultPlan(latency_ms=300))
    worker = start_worker(
        tmp_path, "alone", server, corpus_dir, f"{redis_url}/1", "-s", "PITH_FRONTIER_UNREACHABLE_MAX=2"
    )
    try:
        try:
            wait_for(lambda: bundles_served(server, "alone") >= 2, worker)
        finally:
            redis_process.kill()
            redis_process.wait()
        code = worker.wait(timeout=90)
    finally:
        if worker.poll() is None:  # left running, it would wait on the gone Redis forever
            worker.kill()
    log = (tmp_path / "alone.log").read_text()
    assert code == 4, log[-3000:]
    assert "frontier unreachable for" in log
    stats = json.loads((tmp_path / "alone.json").read_text())
    assert stats["finish_reason"] == "frontier_unreachable"
    assert stats["pith/frontier_lost"].startswith("unreachable for")
    assert committed_records(tmp_path, "alone")["alone"]  # what it archived before is committed
