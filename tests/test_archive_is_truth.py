"""The archive is the truth: a scheduled crawl into the same place, which was deleted,
emptied, restored from an older copy or replaced in between, gets every missing record
back, whatever state outside the archive (the conditional-request validators in the
user's cache, a job directory, a Redis frontier) remembers. Each test runs the real
command line against a server on a fixed address, as a real registry is."""

import json
import shutil
import urllib.request
from pathlib import Path

import boto3
import pytest

from pith.keyring import Keyring
from pith_testkit.faults import FaultPlan
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import run_cli
from tests.plugins.core import real_bundle_paths
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.mirror import serve_process
from tests.test_frontier import committed_records, finish, start_worker

REAL_SUFFIXES = {path.name.split(".")[0] for path in real_bundle_paths()}

DROPPED = "cache did not match the archive: validators dropped"


def corpus_key_id(corpus_dir) -> str:
    """The corpus's own signing key: not the registry's."""
    keyring = Keyring.build([corpus_dir / KEYRING_NAME], default_keys=False)
    [key_id] = [key.key_id for key in keyring if key.key_id != "pith-v1-2026-05"]
    return key_id


@pytest.mark.slow
def test_a_deleted_archive_gets_every_record_back(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    first = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive)
    first.check()
    assert first.stat("archived") == len(suffixes) == 3

    again = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive)  # nothing changed: the validators hold
    again.check()
    assert (again.stat("not_modified"), again.stat("archived")) == (3, 0)
    assert "cache did not match" not in again.stdout

    shutil.rmtree(archive)
    restored = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive)
    restored.check()
    assert restored.stat("archived") == 3
    assert restored.stat("not_modified") == 0
    assert restored.stats["pith/cache_dropped/validators"] == 3
    assert DROPPED in restored.stdout
    assert len(list((archive / "raw" / "bundles").rglob("*.json"))) == 3


@pytest.mark.slow
def test_an_archive_restored_from_an_older_copy_gets_back_what_came_after(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive, backup = tmp_path / "archive", tmp_path / "backup"
    run_cli_crawl(
        tmp_path, "--no-follow", suffixes[0], resolver=base, out=archive
    ).check()  # one record, then the backup
    shutil.copytree(archive, backup)
    later = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive)
    later.check()
    assert (later.stat("not_modified"), later.stat("archived")) == (1, 2)

    shutil.rmtree(archive)
    shutil.copytree(backup, archive)
    result = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive)
    result.check()
    # the record the copy holds is still unchanged; the two archived after it come back
    assert (result.stat("not_modified"), result.stat("archived")) == (1, 2)
    assert result.stats["pith/cache_dropped/validators"] == 2
    assert DROPPED in result.stdout


def test_a_fresh_bucket_at_the_same_url_gets_every_record(tmp_path, static_site, s3_endpoint, s3_env):
    base, suffixes, _ = static_site
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket="pith-same-url")
    url = "s3://pith-same-url/archive"
    run_cli_crawl(tmp_path, "--s3-endpoint-url", s3_endpoint, suffixes[0], resolver=base, out=url).check()

    objects = client.list_objects_v2(Bucket="pith-same-url")["Contents"]
    client.delete_objects(Bucket="pith-same-url", Delete={"Objects": [{"Key": o["Key"]} for o in objects]})
    client.delete_bucket(Bucket="pith-same-url")
    client.create_bucket(Bucket="pith-same-url")
    result = run_cli_crawl(tmp_path, "--s3-endpoint-url", s3_endpoint, suffixes[0], resolver=base, out=url)
    result.check()
    assert result.stat("archived") == 3
    assert DROPPED in result.stdout
    raws = client.list_objects_v2(Bucket="pith-same-url", Prefix="archive/raw/bundles/")
    assert raws["KeyCount"] == 3


@pytest.mark.slow
def test_a_finished_job_whose_archive_was_deleted_crawls_again(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive, jobdir = tmp_path / "archive", tmp_path / "job"
    run_cli_crawl(tmp_path, "--jobdir", str(jobdir), suffixes[0], resolver=base, out=archive).check()
    shutil.rmtree(archive)
    result = run_cli_crawl(tmp_path, "--jobdir", str(jobdir), suffixes[0], resolver=base, out=archive)
    result.check()
    assert result.stat("archived") == 3
    assert result.stats["pith/cache_dropped/job"] == 1  # the manifest the job committed is gone
    assert "cache did not match the archive: validators dropped, the job's state dropped" in result.stdout


def test_two_frontier_workers_after_the_archive_was_replaced(tmp_path, corpus_dir, corpus_catalog, mirror, redis_url):
    server = mirror(faults=FaultPlan(latency_ms=50))
    every = sorted(corpus_catalog.entry(s).pith_number for s in corpus_catalog.suffixes)
    first = {name: start_worker(tmp_path, name, server, corpus_dir, redis_url) for name in ("a", "b")}
    for name, process in first.items():
        finish(process, tmp_path, name)
    found = committed_records(tmp_path, "a", "b")
    assert sorted(found.get("a", []) + found.get("b", [])) == every

    shutil.rmtree(tmp_path / "archive")  # replaced by an empty one at the same place
    (tmp_path / "archive").mkdir()
    second = {name: start_worker(tmp_path, name, server, corpus_dir, redis_url) for name in ("a", "b")}
    stats = {name: finish(process, tmp_path, name) for name, process in second.items()}
    found = committed_records(tmp_path, "a", "b")
    assert sorted(found.get("a", []) + found.get("b", [])) == every  # every record back, once
    assert sum(s.get("pith/cache_dropped/frontier", 0) for s in stats.values()) == len(every)
    assert sum(s.get("pith/archived", 0) for s in stats.values()) == len(every)


# --- nothing a scheduler reads as success hides "nothing done" ------------------------


@pytest.mark.slow
def test_max_failures_counts_a_record_whose_bundle_and_page_both_fail_once(tmp_path, static_site):
    base, suffixes, root = static_site
    lost = suffixes[1]
    for folder in (root / "pith" / lost, root / ".well-known" / "pith" / lost):
        shutil.rmtree(folder)  # its bundle and its page: 404 both
    result = run_cli_crawl(
        tmp_path, "--max-failures", "1", suffixes[0], suffixes[2], resolver=base, out=tmp_path / "archive"
    )
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]  # partial: one record, within the budget
    assert "fetch failures: fetch_failed 1" in result.stdout
    assert result.stat("page_failures_after_bundle") == 1  # its page failed too: the same record


@pytest.mark.slow
def test_serve_refuses_an_archive_it_can_serve_nothing_of(tmp_path, corpus_dir, corpus_catalog, mirror):
    minted = sorted(s for s in corpus_catalog.suffixes if s not in REAL_SUFFIXES)[:3]
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, "--no-follow", *minted, resolver=mirror().url, out=archive, corpus=corpus_dir).check()
    refused = run_cli("serve", archive, home=tmp_path, timeout=60)  # only the built-in registry key: not the corpus's
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stdout == ""  # no URL: it never started
    [line] = refused.stderr.splitlines()
    assert "none of its 3 records can be served" in line
    assert f"signed by {corpus_key_id(corpus_dir)} (3), not a pinned registry key" in line
    assert "--keyring FILE" in line


@pytest.mark.slow
def test_serve_says_once_what_it_withholds(tmp_path, corpus_dir, corpus_catalog, mirror):
    minted = sorted(s for s in corpus_catalog.suffixes if s not in REAL_SUFFIXES)[:2]
    archive = tmp_path / "archive"
    run_cli_crawl(
        tmp_path, "--no-follow", *minted, *sorted(REAL_SUFFIXES), resolver=mirror().url, out=archive, corpus=corpus_dir
    ).check()
    log = tmp_path / "serve.log"
    with log.open("w") as stderr, serve_process(archive, stderr=stderr) as (process, url):
        real = next(iter(sorted(REAL_SUFFIXES)))
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{url}/pith/{real}/bundle.json") as r:
            assert r.status == 200
    said = log.read_text()
    assert said.count("withholding") == 1
    assert f"withholding 2 of 5 records: they are signed by {corpus_key_id(corpus_dir)} (2)" in said


@pytest.mark.slow
def test_checkpoint_prove_and_audit_name_the_key_that_is_not_pinned(tmp_path, static_site, monkeypatch):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, "--no-follow", suffixes[0], resolver=base, out=archive).check()
    [key_document] = (archive / "keys").glob("*.json")
    key_id = json.loads(key_document.read_text())["key_id"]
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another-machine"))  # without the archiver key
    number = json.loads(real_bundle_paths()[0].read_text())["pith_number"]
    for args in (["checkpoint", str(archive)], ["prove", str(archive), number]):
        result = run_cli(*args)
        assert result.returncode == 2, result.output
        assert "has no checkpoint" not in result.output
        assert f"for {key_id}, pass --keyring {archive}/keys/{key_id}.json" in result.output
        assert "or --trust-archive-keys" in result.output
    audit = run_cli("audit", str(archive))
    assert audit.returncode == 1
    assert f"signed by {key_id}" in audit.output and f"--keyring {archive}/keys/{key_id}.json" in audit.output


def test_a_record_a_pipeline_raised_on_is_not_reported_as_archived(tmp_path, static_site):
    """A bug in any pipeline drops the item it raised on: that record is not archived,
    so the run counts it as a failure (exit 3 within --max-failures, 4 past it)."""
    base, suffixes, _ = static_site
    pipelines = json.dumps(
        {
            "pipelines.verdict_stats.VerdictStatsPipeline": 100,
            "tests.plugins.faulty_pipeline.RaiseOnFirstBundle": 200,
            "pipelines.archive.ArchivePipeline": 300,
        }
    )
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    args = ("--resolver", base, "--out", str(tmp_path / "archive"), "-s", f"ITEM_PIPELINES={pipelines}")
    within = run_cli_crawl(tmp_path, *args, "--max-failures", "1", suffixes[0], env=env)
    assert (within.returncode, within.stat("item_errors"), within.stat("archived")) == (3, 1, 2), within.stderr[-3000:]
    assert "fetch failures: item_errors 1" in within.stdout
    past = run_cli_crawl(tmp_path, *args, "--max-failures", "0", suffixes[0], env=env)
    assert (past.returncode, past.stat("item_errors")) == (4, 1)
