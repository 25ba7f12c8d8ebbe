"""A sync from a peer archive in a folder (``sync``) against the floor:
a plain json + hashlib + pynacl verifier (bench/plain_verify.py) of the same bundles
on the same cores, reading them from the same folder.

    python bench/bench_peer_sync.py [--records 6000] [--changed 60] [--rounds 3] [--work DIR]
    python bench/bench_peer_sync.py --virtual 300000 [--rounds 1] [--work DIR]

Makes a peer archive, then times, ROUNDS times in turn: the plain verifier over the
peer's raw objects on every core, and a bootstrap sync into an empty archive (a
subprocess: its files read, its peak memory, sampled from /proc every 0.2 s, summed
over its process tree and of its largest process); wall and CPU seconds of each (the
CPU of its whole process tree: on cores shared with other work, the wall ratio flatters
the sync, whose parent process and workers take a larger share than the verifier's
two processes, while the CPU ratio does not move with the load). With ``--records``
the peer is a minted corpus archived in one run by the archive writer, and after
CHANGED records are rebuilt at the peer the second sync is timed too (files read).
With ``--virtual`` it is built cheaply: the records ``pith-testkit serve --virtual N``
plans, minted on every core straight into the peer's folder as raw objects, whose
attestations the peer's key signs into its log; no tables, no manifest (a sync reads
neither). Prints a table for bench/RESULTS.md.
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from multiprocessing import get_context
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from plain_verify import PlainVerifier  # noqa: E402

from pith.canonical import canon, sha256_hex  # noqa: E402
from pith.keyring import Keyring  # noqa: E402
from pith.signing import Signer, utc_now  # noqa: E402
from pith.verify import verify_bundle  # noqa: E402
from pith_testkit.corpus import corpus_signer, generate_corpus  # noqa: E402
from pith_testkit.mint import sign_bundle  # noqa: E402
from pith_testkit.virtual import VirtualCorpus  # noqa: E402
from storage.archive import layout  # noqa: E402
from storage.archive.folder_store import LocalStore  # noqa: E402
from storage.archive.signing_key import new_signer  # noqa: E402
from storage.serving.record import compact_json  # noqa: E402
from storage.transparency.attestations import AttestationFeed, Stored  # noqa: E402
from storage.transparency.tiles import TiledLog, publish  # noqa: E402
from storage.writing.writer import ArchiveWriter  # noqa: E402

SEED = 11
MINT_CHUNK = 256  # virtual records a minting process makes at a time
PAGE = os.sysconf("SC_PAGE_SIZE")
_plain: PlainVerifier | None = None
_virtual: tuple[VirtualCorpus, LocalStore] | None = None  # in a minting process (forked)


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


def _mint(start: int) -> list[tuple[Stored, str]]:
    """Virtual records ``start`` on, stored as raw objects: what each is owed."""
    assert _virtual is not None
    corpus, store = _virtual
    owed, now = [], utc_now()
    for suffix in corpus.catalog.suffixes[start : start + MINT_CHUNK]:
        raw = corpus.bundle_bytes(suffix)
        assert raw is not None
        digest, bundle = sha256_hex(raw), orjson.loads(raw)
        path = layout.raw_bundle(digest)
        store.put_bytes(path, raw)
        number, bundle_sha256 = bundle["pith_number"], bundle["bundle_signature"]["bundle_sha256"]
        owed.append((Stored(number, bundle_sha256, bundle["canonical_sha256"], path, digest, len(raw)), now))
    return owed


def virtual_peer(peer: Path, keyring_file: Path, signer: Signer, records: int) -> None:
    """A peer archive of ``records`` virtual records: raw objects and the signed log."""
    global _virtual
    corpus = VirtualCorpus(records, SEED, cache_size=1)
    corpus.write_keyring(keyring_file)
    store = LocalStore(peer)
    _virtual = corpus, store
    cores = len(os.sched_getaffinity(0))
    with ProcessPoolExecutor(cores, mp_context=get_context("fork")) as pool:
        owed: Iterator[tuple[Stored, str]] = (
            item for chunk in pool.map(_mint, range(0, records, MINT_CHUNK)) for item in chunk
        )
        signed = AttestationFeed(signer, store.uri, None).seal(owed, layout.new_run_id("peer"))
        _, note = TiledLog.resume(store, signer, None).extend(store, (canon(event, exact=True) for event in signed))
    publish(store, signer.key_id, note)
    _virtual = None


def tree_rss(root: int) -> tuple[int, int]:
    """Resident bytes of process ``root`` and its descendants, summed, and of the largest."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as handle:
                    parent = int(handle.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    sizes, todo = [], [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/statm") as handle:
                sizes.append(int(handle.read().split()[1]) * PAGE)
        except (OSError, ValueError, IndexError):
            continue
    return sum(sizes), max(sizes, default=0)


@dataclass
class Measured:
    """One timed run: wall and CPU seconds (user and system, its whole process tree), and
    for a sync its peak RSS (MiB, sampled: summed over the tree, and of its largest
    process) and the files it read."""

    seconds: float
    cpu: float
    summed: float = 0.0
    largest: float = 0.0
    reads: int = 0


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def sync(peer: Path, out: Path, keyrings: list[Path], key: Path) -> Measured:
    """A sync of ``peer`` into ``out``, as a subprocess."""
    if not key.exists():  # --signing-key names a key that exists: only the default is made on first use
        new_signer().save(key)
    args = ["sync", str(peer), "--out", str(out), "--no-default-keys", "--signing-key", str(key)]
    for ring in keyrings:
        args += ["--keyring", str(ring)]
    started, cpu = time.perf_counter(), _children_cpu()
    process = subprocess.Popen(  # noqa: S603 - this interpreter, the project's own command
        [sys.executable, "-m", "pith_archiver", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    peaks = [0, 0]

    def sample() -> None:
        while process.poll() is None:
            summed, largest = tree_rss(process.pid)
            peaks[:] = max(peaks[0], summed), max(peaks[1], largest)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    took, cpu = time.perf_counter() - started, _children_cpu() - cpu
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"sync exited {process.returncode}: {stderr.decode()[-2000:]}")
    reads = int(stdout.decode().split(" files read")[0].rsplit(" ", 1)[1])
    return Measured(took, cpu, peaks[0] / 2**20, peaks[1] / 2**20, reads)


def plain(peer: Path, keyring: Keyring) -> Measured:
    """The plain verifier over the peer's raw objects on every core (``reads``: how many)."""
    keys = {key.key_id: key.raw for key in keyring}
    paths = [str(path) for path in sorted((peer / "raw" / "bundles").rglob("*.json"))]
    started, cpu = time.perf_counter(), _children_cpu()
    with ProcessPoolExecutor(len(os.sched_getaffinity(0)), initializer=_start, initargs=(keys,)) as pool:
        assert all(pool.map(_plain_check, paths, chunksize=64))
    return Measured(time.perf_counter() - started, _children_cpu() - cpu, reads=len(paths))


def minted_peer(work: Path, peer: Path, keyring_file: Path, signer: Signer, records: int) -> list[bytes]:
    """A peer archive of a minted corpus of ``records``, archived in one run; its bundles."""
    generate_corpus(work / "corpus", records, SEED)
    keyring_file.write_bytes((work / "corpus" / "keyring.json").read_bytes())
    raws = [path.read_bytes() for path in sorted((work / "corpus" / "bundles").glob("*.bundle.json"))]
    archive(LocalStore(peer), signer, Keyring.build([keyring_file], default_keys=False), raws)
    return raws


def rebuild(peer: Path, signer: Signer, keyring: Keyring, raws: list[bytes]) -> int:
    """Rebuild ``raws`` later and archive them at the peer; how many."""
    registry, changed = corpus_signer(SEED), []
    for raw in raws:
        bundle = json.loads(raw)
        bundle["built_at"] = "2026-09-01T00:00:00Z"
        changed.append(compact_json(sign_bundle(bundle, registry, "2026-09-01T00:00:00Z")))
    archive(LocalStore(peer), signer, keyring, changed)
    return len(changed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=6000)
    parser.add_argument("--virtual", type=int, default=0, help="a virtual peer of this many records")
    parser.add_argument("--changed", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-plain", action="store_true", help="time the sync only (a peer too large to read twice)")
    parser.add_argument("--work", type=Path, default=None, help="made anew; with --reuse, one made before")
    parser.add_argument("--reuse", action="store_true", help="time the peer an earlier run left in --work")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-peer-sync-"))
    work.mkdir(parents=True, exist_ok=True)
    peer, keyring_file, peer_key, own_key, peer_seed = (
        work / name for name in ("peer", "keyring.json", "peer-key.json", "own-key.json", "peer-signing-key.json")
    )
    started, raws = time.perf_counter(), []
    if args.reuse:
        raws = [path.read_bytes() for path in sorted((work / "corpus" / "bundles").glob("*.bundle.json"))]
    else:
        print(f"minting {args.virtual or args.records} records into {peer} ...", file=sys.stderr)
        peer_signer = Signer.generate("bench-peer")
        peer_signer.save(peer_seed)
        if args.virtual:
            virtual_peer(peer, keyring_file, peer_signer, args.virtual)
        else:
            raws = minted_peer(work, peer, keyring_file, peer_signer, args.records)
        peer_key.write_text(json.dumps(peer_signer.pinned().document()))
        print(f"peer made in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    keyring, keyrings = Keyring.build([keyring_file], default_keys=False), [keyring_file, peer_key]
    for path in () if args.no_plain else (peer / "raw" / "bundles").rglob("*.json"):
        path.read_bytes()  # into the page cache: neither reads it cold
    rounds, loads = [], [os.getloadavg()[0]]
    for number in range(1, args.rounds + 1):
        copy = Path(tempfile.mkdtemp(prefix="copy-", dir=work))
        floor = Measured(math.nan, math.nan, reads=args.virtual or len(raws)) if args.no_plain else plain(peer, keyring)
        rounds.append((floor, sync(peer, copy, keyrings, own_key)))
        loads.append(os.getloadavg()[0])
        print(
            f"round {number}: plain {rounds[-1][0].seconds:.2f} s, sync {rounds[-1][1].seconds:.2f} s", file=sys.stderr
        )
    report(rounds, loads)
    if raws and args.changed:
        changed = rebuild(peer, Signer.load(peer_seed), keyring, raws[: args.changed])
        again = sync(peer, copy, keyrings, own_key)
        print(
            f"| second sync, {changed} changed: {again.reads} files read (budget {1.1 * changed + 40:.0f}) "
            f"| {again.seconds:.2f} | {again.cpu:.2f} | {again.summed:.0f} ({again.largest:.0f}) |"
        )


def report(rounds: list[tuple[Measured, Measured]], loads: list[float]) -> None:
    """The rounds as a table: plain verifier, then sync; wall and CPU seconds; memory."""
    count, load = rounds[0][0].reads, f"load {min(loads):.1f}-{max(loads):.1f}"
    print(f"| {count} records, {len(os.sched_getaffinity(0))} cores, {load} | seconds | CPU seconds | peak MiB |")
    print("| --- | --- | --- | --- |")
    for number, (floor, boot) in enumerate(rounds, 1):
        print(
            f"| round {number}: plain / `crawl --from-archive` ({boot.reads} files read) "
            f"| {floor.seconds:.2f} / {boot.seconds:.2f} (**{boot.seconds / floor.seconds:.2f}x**) "
            f"| {floor.cpu:.2f} / {boot.cpu:.2f} ({boot.cpu / floor.cpu:.2f}x) "
            f"| {boot.summed:.0f} ({boot.largest:.0f}) |"
        )
    if len(rounds) > 1:
        wall = statistics.median(boot.seconds / floor.seconds for floor, boot in rounds)
        cpu = statistics.median(boot.cpu / floor.cpu for floor, boot in rounds)
        floors, boots = (statistics.median(measured.seconds for measured in side) for side in zip(*rounds))
        print(f"| median of {len(rounds)} rounds | {floors:.2f} / {boots:.2f} (**{wall:.2f}x**) | ({cpu:.2f}x) | |")


if __name__ == "__main__":
    main()
