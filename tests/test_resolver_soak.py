"""One long crawl through a mirror that injects every fault mode at once, at seeded
random rates: latency, 5xx errors, 429s with Retry-After, the first request of every
path failing, dropped connections, truncated bodies, wrong content types, tampered
bundles, a redirect loop and an endless body. The crawl completes, every good record
is archived, and every failure is counted in the stats and in ``verifications``.

PITH_SOAK_RECORDS=N soaks a freshly minted corpus of N records instead of the shared
one (43 records); PITH_SOAK_SEED changes the draws.
"""

import os
import random
from collections import Counter
from urllib.parse import urlsplit

import pytest

from pith_testkit.corpus import generate_corpus
from pith_testkit.faults import FaultPlan
from storage.serving.source import KEYRING_NAME, CorpusDirectory
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

pytestmark = pytest.mark.slow  # every test here crawls, serves or waits for over a second

SOAK_RECORDS = int(os.environ.get("PITH_SOAK_RECORDS", "0"))
SEED = int(os.environ.get("PITH_SOAK_SEED", "5"))
TRANSIENT = ("fail_first", "rate_limit", "error", "drop", "truncate")  # each one answered by a retry
MAX_BYTES = 1_000_000


def test_every_fault_at_once_in_one_long_crawl(tmp_path, corpus_dir, mirror, figures):
    if SOAK_RECORDS:
        corpus_dir = tmp_path / "corpus"
        generate_corpus(corpus_dir, SOAK_RECORDS, SEED)
    catalog = CorpusDirectory(corpus_dir).catalog
    rng = random.Random(SEED)
    tampered, looping, endless = set(rng.sample(catalog.suffixes, 2)), *rng.sample(catalog.suffixes, 2)
    while looping in tampered or endless in tampered:
        looping, endless = rng.sample(catalog.suffixes, 2)
    plan = FaultPlan(
        latency_ms=5,
        error_rate=0.05,
        error_status=500,
        rate_limit_every=29,
        retry_after=1,
        drop_rate=0.04,
        truncate_rate=0.04,
        fail_first=1,
        wrong_content_type=True,
        tamper=tampered,
        redirect_loop={looping},
        oversize={endless},
        oversize_bytes=4 * MAX_BYTES,
        seed=SEED,
    )
    server = mirror(corpus_dir, faults=plan)
    result = run_cli_crawl(
        tmp_path,
        "--resolver",
        server.url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        "--out",
        str(tmp_path / "archive"),
        "sitemap",
        "-s",
        "RETRY_TIMES=12",
        "-s",
        "PITH_RETRY_BACKOFF_BASE=0.01",
        "-s",
        "PITH_RETRY_AFTER_MAX=0.05",
        "-s",
        "AUTOTHROTTLE_ENABLED=false",
        "-s",
        f"DOWNLOAD_MAXSIZE={MAX_BYTES}",
        "--max-failures",
        "10",
        timeout=600,
    )
    assert result.returncode == 1, result.stderr[-3000:]  # the tampered bundles are rejections
    injected = Counter(r.fault for r in server.requests if r.fault)
    assert all(
        injected[kind] > 0 for kind in (*TRANSIENT, "wrong_content_type", "tamper", "redirect_loop", "oversize")
    ), injected

    # every good record is archived, once
    good = set(catalog.suffixes) - tampered - {looping, endless}
    numbers = [row["pith_number"] for row in read_rows(tmp_path / "archive", "records")]
    assert sorted(numbers) == sorted(catalog.entry(suffix).pith_number for suffix in good)

    # every failure is counted: retries, verdicts, fetch failures, in the stats...
    retried = {
        key.rpartition("/")[2]: count for key, count in result.stats.items() if key.startswith("retry/reason_count/")
    }
    assert (retried.get("HTTP 503", 0), retried.get("HTTP 429", 0), retried.get("HTTP 500", 0)) == (
        injected["fail_first"],
        injected["rate_limit"],
        injected["error"],
    )
    assert retried.get("scrapy.exceptions.ResponseDataLossError", 0) == injected["truncate"]
    # a dropped connection that had carried an earlier request is retried by the HTTP
    # client itself (Twisted does so for idempotent requests), the others by Scrapy
    dropped = sum(count for reason, count in retried.items() if reason.endswith(("FailedError", "NeverReceived")))
    assert dropped <= injected["drop"]
    assert result.stats.get("retry/count", 0) == sum(retried.values())
    assert result.stats.get("retry/max_reached", 0) == 0
    assert result.stat("retry_after_honoured") == injected["fail_first"] + injected["rate_limit"]
    assert (result.stat("verified"), result.stat("rejected")) == (len(good), len(tampered))
    assert result.stat("rejected/canonical_hash_mismatch") == len(tampered)
    assert result.stat("bundle_failures/fetch_failed") == result.stat("bundle_failures/too_large") == 1
    assert result.stat("pages_fetched") == 0  # the sitemap lists every record: no page is needed
    # ... and in the verifications table, one row per bundle, naming what happened
    rows = {
        urlsplit(row["url"]).path.split("/")[-2]: row
        for row in read_rows(tmp_path / "archive", "verifications")
        if urlsplit(row["url"]).path.endswith("/bundle.json")
    }
    assert {suffix: rows[suffix]["reason"] for suffix in tampered | {looping, endless}} == {
        **{suffix: "canonical_hash_mismatch" for suffix in tampered},
        looping: "fetch_failed",
        endless: "too_large",
    }
    assert {rows[suffix]["status"] for suffix in good} == {"verified"}
    figures.add(
        "resolver:soak",
        records=len(catalog),
        requests=len(server.requests),
        **dict(injected),
        retries=result.stats.get("retry/count", 0),
        drops_retried_by_the_client=injected["drop"] - dropped,
        archived=len(numbers),
        records_lost=0,
    )
