"""What each part of archiving a bundle costs alone, in CPU per bundle, on this machine:
the crawl's extra work beside fetching it (which the bare spider of bench_crawl.py
measures), each part timed by itself in one process over the same bundles.

    python bench/bundle_budget.py [--records 6000] [--bundles 3000] [--workdir DIR]

Parts: checking a bundle as the verifier worker does (``BundleChecker``: parse, verify,
prepare its rows); its three WARC records (``WarcWriter.record`` and ``verdict``);
storing its raw object in a folder archive (``store_verified``), in a loop of stores
alone and between checks (as the worker does), with the checks it slows beside it.
The corpus is bench_crawl.py's (minted once into --workdir, its own key).
"""

import argparse
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_crawl  # noqa: E402  (bench/bench_crawl.py)

from crawler.verifying.verify_worker import BundleChecker, store_verified  # noqa: E402
from pith.keyring import Keyring  # noqa: E402
from pith.parse import Limits  # noqa: E402
from pith_archiver.keyrings import build_keyring  # noqa: E402
from storage.archive.folder_store import LocalStore  # noqa: E402
from storage.capture.exchanges import Exchange  # noqa: E402
from storage.capture.warc import WarcWriter  # noqa: E402

RESPONSE_HEADERS = [  # what nginx sends with a bundle
    ("Server", "nginx"),
    ("Date", "Sun, 29 Nov 2026 06:00:00 GMT"),
    ("Content-Type", "application/json"),
    ("Content-Length", "12600"),
    ("Last-Modified", "Sun, 29 Nov 2026 05:00:00 GMT"),
    ("Connection", "keep-alive"),
    ("ETag", '"6929f7c0-3138"'),
    ("Accept-Ranges", "bytes"),
]
REQUEST_HEADERS = [("Accept", "application/json"), ("User-Agent", "pith-archiver"), ("Accept-Encoding", "gzip")]


def per_bundle(seconds: float, bundles: int) -> str:
    return f"{seconds / bundles * 1e6:,.0f} µs"


def checking(checker: BundleChecker, raws: list[bytes]) -> float:
    started = time.process_time()
    for raw in raws:
        checker(raw)
    return time.process_time() - started


def recording(raws: list[bytes], spool: str) -> float:
    writer = WarcWriter("20261129T000000Z-bench-00000000", spool, lambda *_: None, lambda: "run", {"software": "bench"})
    verdict = {"status": "verified", "pith_number": "x" * 26, "bundle_sha256": "a" * 64, "key_ids": ["k"]}
    started = time.process_time()
    for number, raw in enumerate(raws):
        url = f"http://127.0.0.1:8080/pith/{number}/bundle.json"
        fetched = datetime.now(timezone.utc)
        writer.record(Exchange(url, "GET", REQUEST_HEADERS, b"", 200, "HTTP/1.1", RESPONSE_HEADERS, raw, fetched))
        writer.verdict(url, verdict)
    return time.process_time() - started


def storing(checker: BundleChecker, raws: list[bytes], folder: str, between_checks: bool) -> tuple[float, float]:
    """CPU seconds of the stores, and of the checks between them (0 without)."""
    store, checked = LocalStore(folder), [checker(raw) for raw in raws]
    stores = checks = 0.0
    for raw, found in zip(raws, checked, strict=True):
        if between_checks:
            started = time.process_time()
            checker(raw)
            checks += time.process_time() - started
        started = time.process_time()
        store_verified(store, found, raw)
        stores += time.process_time() - started
    return stores, checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=6000, help="the corpus bench_crawl.py crawls")
    parser.add_argument("--bundles", type=int, default=3000, help="how many of its bundles each part takes")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "pith-bench")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, _, _ = bench_crawl.corpus_of(args.records, args.workdir)
    raws = [path.read_bytes() for path in sorted((corpus / "bundles").glob("*.bundle.json"))[: args.bundles]]
    keyring: Keyring = build_keyring([str(corpus / "keyring.json")], False)
    checker = BundleChecker(keyring, Limits())
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        rows = [
            ("checking it as the verifier worker does", checking(checker, raws)),
            ("its three WARC records", recording(raws, scratch)),
        ]
        stores, _ = storing(checker, raws, f"{scratch}/alone", between_checks=False)
        rows.append(("storing its raw object, stores alone", stores))
        stores, checks = storing(checker, raws, f"{scratch}/between", between_checks=True)
        rows.append(("storing its raw object, between checks", stores))
        rows.append(("checking it, between stores", checks))
    print(f"| per bundle, alone ({len(raws):,} bundles of {corpus.name}) | CPU |")
    print("| --- | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {per_bundle(seconds, len(raws))} |")


if __name__ == "__main__":
    main()
