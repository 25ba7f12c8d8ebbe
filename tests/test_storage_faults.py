"""Faults between the archiver and its S3 store, injected by a real proxy in front of
the S3 test server: 500 InternalError, 503 SlowDown, connections reset before a
request reaches the store or after it was applied (the answer lost), and slow
answers. Transient ones are retried and survived with nothing lost; a store that
keeps failing stops the crawl with a clear error, and nothing of that run is committed.

PITH_STORAGE_FAULT_RATE (default 0.01) sets the rate of each transient kind in the
flaky crawl; every fault costs boto3 a backoff, and a SlowDown slows the rest of the
run (adaptive retries pace the client), so high rates make long runs.
"""

import hashlib
import os
from datetime import datetime, timezone

import pytest

from pith.verify import verify_bundle
from storage.archive.manifest import committed_manifests
from storage.archive.s3_store import S3Store
from storage.archive.stores import StorageError
from storage.writing.writer import ArchiveWriter
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.faults import S3_ERRORS, FaultRule, archiver_keyring, audit_archive

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
TRANSIENT = ("internal_error", "slow_down", "reset", "reset_after", "slow")
FAULT_RATE = float(os.environ.get("PITH_STORAGE_FAULT_RATE", "0.01"))  # of each kind, on every request


def flaky(rate: float) -> list[FaultRule]:
    """Every transient kind once on the first raw bundle PUTs (so each one is proven
    whatever the order of requests), then each at ``rate`` on any request."""
    first = [FaultRule(kind, methods=("PUT",), path=r"/raw/bundles/", limit=1, delay=0.2) for kind in TRANSIENT]
    return [*first, *(FaultRule(kind, rate=rate, delay=0.2) for kind in TRANSIENT)]


def crawl_through(proxy, tmp_path, corpus_dir, mirror, s3_bucket):
    """A crawl of the real seed into ``s3_bucket``, its S3 requests through ``proxy``."""
    return run_cli_crawl(
        tmp_path,
        "--s3-endpoint-url",
        proxy.url,
        REAL,
        resolver=mirror().url,
        out=f"s3://{s3_bucket}/archive",
        corpus=corpus_dir,
    )


def test_a_crawl_survives_a_flaky_store_and_loses_nothing(
    tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, fault_proxy, s3_bucket, s3_endpoint, figures
):
    proxy = fault_proxy(*flaky(FAULT_RATE), seed=11)
    result = crawl_through(proxy, tmp_path, corpus_dir, mirror, s3_bucket)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("archived") == len(corpus_catalog)
    assert all(proxy.injected[kind] >= 1 for kind in TRANSIENT), proxy.injected
    # a PUT whose answer was lost is retried, finds its own bytes there (412) and succeeds
    lost = [r.path for r in proxy.log if r.fault == "reset_after" and r.method == "PUT"]
    assert any(r.status == 412 and r.path in lost for r in proxy.log)

    check = audit_archive(
        S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint), archiver_keyring(tmp_path), corpus_keyring
    )
    assert check.clean, check.discrepancies
    assert sorted(check.numbers()) == sorted(corpus_catalog.entry(s).pith_number for s in corpus_catalog.suffixes)
    figures.add(
        "storage:flaky_crawl",
        requests=len(proxy.log),
        **dict(proxy.injected),
        retried=sum(proxy.injected.values()),
        records_lost=0,
    )


def test_a_store_that_keeps_refusing_stops_the_crawl_and_commits_nothing(
    tmp_path, corpus_dir, corpus_catalog, mirror, fault_proxy, s3_bucket, s3_endpoint, figures
):
    # every PUT but the write probe's (a store refusing that one is refused before the crawl: exit 2)
    proxy = fault_proxy(FaultRule("access_denied", methods=("PUT",), path=r"/archive/[^.]"))
    result = crawl_through(proxy, tmp_path, corpus_dir, mirror, s3_bucket)
    assert result.returncode == 4
    assert "AccessDenied" in result.stats["pith/commit_error"]
    assert "failed (exit 4): the final commit failed" in result.stderr and "AccessDenied" in result.stderr
    assert "pith/manifest" not in result.stats
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    assert [s.path for s in store.list("manifests/")] == []
    figures.add(
        "storage:refusing_store",
        access_denied=proxy.injected["access_denied"],
        committed=0,
        bundles_fetched=result.stat("bundles_fetched"),
    )
    # and it stopped, rather than fetching the whole crawl for nothing
    assert result.stats["finish_reason"] == "storage_failed"
    assert result.stat("bundles_fetched") < len(corpus_catalog)


@pytest.mark.parametrize("kind", ["slow_down", "reset"])
def test_a_store_that_keeps_failing_is_retried_then_nothing_is_committed(
    kind, fault_proxy, s3_bucket, s3_endpoint, real_raw, registry_keyring, test_signer, test_keyring, figures
):
    """Retried max_attempts times (botocore counts retries, after the first try), then
    StorageError; commit writes no manifest."""
    proxy = fault_proxy(FaultRule(kind, methods=("PUT",), path=r"/raw/bundles/"))
    store = S3Store(s3_bucket, "archive", endpoint_url=proxy.url, max_attempts=2)
    writer = ArchiveWriter(store, test_signer, worker="w0").open()
    raw = real_raw[REAL]
    failed = writer.add_verified(raw, verify_bundle(raw, registry_keyring), "http://mirror/x", _now())
    assert isinstance(failed.exception(timeout=60), StorageError)
    with pytest.raises(StorageError) as caught:
        writer.commit()
    assert hashlib.sha256(raw).hexdigest() in str(caught.value)
    attempts = [r for r in proxy.log if r.fault == kind]
    assert len(attempts) == 1 + 2  # every attempt was made, none more
    direct = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    assert list(committed_manifests(direct, test_keyring)) == []
    assert [s.path for s in direct.list("manifests/")] == []
    figures.add(f"storage:keeps_failing:{kind}", attempts=len(attempts), committed=0)
    if kind in S3_ERRORS:
        assert all(r.status == S3_ERRORS[kind][0] for r in attempts)


def _now():
    return datetime.now(timezone.utc)
