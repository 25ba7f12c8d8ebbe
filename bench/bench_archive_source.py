"""Startup of a mirror serving an archive: how long ``ArchiveSource`` takes to build its
catalog from the committed tables, against the way it avoids, reading and parsing
every current bundle (one object each: on S3, one request each).

Archives the corpus bench/out/corpus-N-seed1 (generated on first use) once, into
bench/out/archive-N or into --archive s3://bucket/prefix, then times both (best of
--repeat). The baseline is given the current versions for free.

    python bench/bench_archive_source.py --records 10000
    python bench/bench_archive_source.py --records 10000 --archive s3://bench/a --s3-endpoint-url http://127.0.0.1:5000
"""

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test kit: used from the checkout

from pith.keyring import Keyring  # noqa: E402
from pith.numbers import suffix_of  # noqa: E402
from pith.parse import parse  # noqa: E402
from pith.signing import Signer  # noqa: E402
from pith.verify import verify_bundle  # noqa: E402
from pith_testkit.corpus import generate_corpus  # noqa: E402
from storage.archive.open_store import open_store  # noqa: E402
from storage.archive.reader import reading_keyring  # noqa: E402
from storage.serving.archive_source import ArchiveSource  # noqa: E402
from storage.serving.catalog import Catalog  # noqa: E402
from storage.serving.source import BUNDLES_DIR, KEYRING_NAME  # noqa: E402
from storage.writing.writer import ArchiveWriter  # noqa: E402

HERE = Path(__file__).resolve().parent
SIGNER = Signer.from_seed("bench-archiver", bytes(32))


def fill(store, corpus: Path) -> None:
    """Archive every bundle of the corpus in one run (skipped when already done)."""
    if any(store.list("manifests/")):
        return
    keyring = Keyring.build([corpus / KEYRING_NAME], default_keys=False)
    writer = ArchiveWriter(store, SIGNER).open()
    fetched_at = datetime.now(timezone.utc)
    for path in sorted((corpus / BUNDLES_DIR).iterdir()):
        raw = path.read_bytes()
        writer.add_verified(raw, verify_bundle(raw, keyring), f"http://bench/{path.name}", fetched_at)
    writer.commit(params={"bench": "archive_source"})


def best(repeat: int, run) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--archive", help="Folder or s3://bucket/prefix [default: bench/out/archive-N].")
    parser.add_argument("--s3-endpoint-url")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    corpus = HERE / "out" / f"corpus-{args.records}-seed1"
    if not corpus.exists():
        generate_corpus(corpus, args.records, 1)
    store = open_store(args.archive or str(HERE / "out" / f"archive-{args.records}"), args.s3_endpoint_url)
    fill(store, corpus)
    keyring = reading_keyring(store, Keyring.build([corpus / KEYRING_NAME], default_keys=False), archive_keys=True)

    tables, source = best(args.repeat, lambda: ArchiveSource(store, keyring))
    bundles, catalog = best(
        args.repeat,
        lambda: Catalog.from_bundles(
            (suffix_of(v.pith_number), parse(store.get_bytes(v.raw.path)).data) for v in source.versions.values()
        ),
    )
    assert catalog.suffixes == source.catalog.suffixes
    print(f"{store.uri}: {len(source.catalog)} records")
    print(f"  ArchiveSource (committed tables):   {tables:6.2f} s")
    print(f"  reading and parsing every bundle:   {bundles:6.2f} s")


if __name__ == "__main__":
    main()
