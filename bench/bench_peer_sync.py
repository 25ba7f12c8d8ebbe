"""A sync from a peer archive in a folder (``crawl --from-archive``) against the floor:
a plain json + hashlib + pynacl verifier (bench/plain_verify.py) of the same bundles
on the same cores, reading them from the same folder.

    python bench/bench_peer_sync.py [--records 6000] [--changed 60] [--work DIR]

Makes a corpus of RECORDS minted bundles and a peer archive of it (one run, the
archive writer), then times: the plain verifier over the peer's raw objects on every
core; a bootstrap sync into an empty archive (a subprocess: its wall time and peak
memory); and, after CHANGED records are rebuilt at the peer, the second sync (time and
files read). Prints a table for bench/RESULTS.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from plain_verify import PlainVerifier  # noqa: E402

from pith.keyring import Keyring  # noqa: E402
from pith.signing import Signer  # noqa: E402
from pith.verify import verify_bundle  # noqa: E402
from pith_testkit.corpus import corpus_signer, generate_corpus  # noqa: E402
from pith_testkit.mint import sign_bundle  # noqa: E402
from storage.archive.folder_store import LocalStore  # noqa: E402
from storage.serving.record import compact_json  # noqa: E402
from storage.writing.writer import ArchiveWriter  # noqa: E402

SEED = 11
# the sync in a process of its own, whose children's peak RSS it reports (this one's
# workers, forked from a process holding the whole corpus, would count otherwise)
MEASURED = (
    "import resource, subprocess, sys; "
    "done = subprocess.run([sys.executable, '-m', 'pith_archiver', *sys.argv[1:]]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)"
)
_plain: PlainVerifier | None = None


def _start(keys: dict) -> None:
    global _plain
    _plain = PlainVerifier(keys)


def _plain_check(path: str) -> bool:
    assert _plain is not None
    with open(path, "rb") as handle:
        return _plain.verify(handle.read()) is None


def archive(store: LocalStore, signer: Signer, keyring: Keyring, raws: list[bytes]) -> None:
    writer = ArchiveWriter(store, signer, worker="peer").open()
    now = datetime.now(timezone.utc)
    for raw in raws:
        verdict = verify_bundle(raw, keyring)
        assert verdict.ok, verdict
        writer.add_verified(raw, verdict, "http://peer.invalid/", now)
    writer.commit(stats={}, params={"bench": True})


def sync(peer: Path, out: Path, keyrings: list[Path], key: Path) -> tuple[float, float, int, str]:
    """Wall seconds, peak RSS MiB (the largest process of the sync's tree), files read, its output."""
    args = ["crawl", "--from-archive", str(peer), "--out", str(out), "--no-default-keys", "--signing-key", str(key)]
    for ring in keyrings:
        args += ["--keyring", str(ring)]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURED, *args], capture_output=True, text=True, cwd=ROOT)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sync exited {done.returncode}: {done.stderr[-2000:]}")
    peak = int(done.stderr.strip().rsplit("\n", 1)[-1]) / 1024
    reads = int(done.stdout.split(" files read")[0].rsplit(" ", 1)[1])
    return took, peak, reads, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=6000)
    parser.add_argument("--changed", type=int, default=60)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-peer-sync-"))
    corpus = work / "corpus"
    print(f"minting {args.records} records in {corpus} ...", file=sys.stderr)
    generate_corpus(corpus, args.records, SEED)
    keyring_file = corpus / "keyring.json"
    keyring = Keyring.build([keyring_file], default_keys=False)
    raws = [path.read_bytes() for path in sorted((corpus / "bundles").glob("*.bundle.json"))]
    peer_signer = Signer.generate("bench-peer")
    peer = work / "peer"
    archive(LocalStore(peer), peer_signer, keyring, raws)
    peer_key = work / "peer-key.json"
    peer_key.write_text(json.dumps(peer_signer.pinned().document()))

    cores = len(os.sched_getaffinity(0))
    keys = {key.key_id: key.raw for key in keyring}
    paths = [str(path) for path in sorted((peer / "raw" / "bundles").rglob("*.json"))]
    started = time.perf_counter()
    with ProcessPoolExecutor(cores, initializer=_start, initargs=(keys,)) as pool:
        assert all(pool.map(_plain_check, paths, chunksize=64))
    plain = time.perf_counter() - started

    copy, own_key = work / "copy", work / "own-key.json"
    boot, boot_mem, boot_reads, _ = sync(peer, copy, [keyring_file, peer_key], own_key)
    signer = corpus_signer(SEED)
    changed = []
    for raw in raws[: args.changed]:
        bundle = json.loads(raw)
        bundle["built_at"] = "2026-09-01T00:00:00Z"
        changed.append(compact_json(sign_bundle(bundle, signer, "2026-09-01T00:00:00Z")))
    archive(LocalStore(peer), peer_signer, keyring, changed)
    again, again_mem, again_reads, _ = sync(peer, copy, [keyring_file, peer_key], own_key)

    print(f"| {len(raws)} records, {cores} cores | seconds | peak MiB | files read |")
    print("| --- | --- | --- | --- |")
    print(f"| plain json + hashlib + pynacl verifier, {cores} processes | {plain:.2f} | | {len(paths)} |")
    print(f"| `crawl --from-archive` bootstrap | {boot:.2f} ({boot / plain:.2f}x) | {boot_mem:.0f} | {boot_reads} |")
    budget = 1.1 * len(changed) + 40
    second = f"{again_reads} (budget {budget:.0f})"
    print(f"| second sync, {len(changed)} changed | {again:.2f} | {again_mem:.0f} | {second} |")


if __name__ == "__main__":
    main()
