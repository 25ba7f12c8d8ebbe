"""What repairing an archive from a peer costs the peer (``audit --repair-from``): an
archive of a minted corpus in one run, a copy of it served by ``pith-archiver serve``
(in this process, its requests logged), then DAMAGE (1%) of its raw objects flipped
in the archive and ``audit ARCHIVE --repair-from URL`` run as a subprocess. Counts the
requests the peer got, by kind, against the objects damaged: a repair reads only the
damaged objects (and each pinned archive key's checkpoint, once).

    python bench/bench_repair.py [--records 100000] [--damage 0.01] [--work DIR]

Prints a row for bench/RESULTS.md.
"""

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_peer_sync import minted_peer  # noqa: E402

from pith.keyring import Keyring  # noqa: E402
from pith.signing import Signer  # noqa: E402
from storage.archive import layout  # noqa: E402
from storage.archive.folder_store import LocalStore  # noqa: E402
from storage.serving.archive_source import ArchiveSource  # noqa: E402
from storage.serving.runner import BackgroundMirror  # noqa: E402
from storage.serving.server import MirrorServer  # noqa: E402

OWN_SEED = bytes(range(9, 41))


def flip(paths: list[Path]) -> None:
    for path in paths:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))


def kind(path: str) -> str:
    if path.startswith(f"/{layout.RAW}/"):
        return "raw objects"
    return "checkpoints" if path.endswith("/checkpoint") else "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--damage", type=float, default=0.01, help="the share of raw objects flipped")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-repair-"))
    work.mkdir(parents=True, exist_ok=True)
    archive, replica, keyring_file, own_key = (work / n for n in ("archive", "replica", "keyring.json", "own-key.json"))
    own = Signer.from_seed("bench-own", OWN_SEED)
    own.save(own_key)
    started = time.perf_counter()
    minted_peer(work, archive, keyring_file, own, args.records)
    shutil.copytree(archive, replica)
    built = time.perf_counter() - started
    raws = sorted((archive / layout.RAW).rglob("*.json"))
    damaged = random.Random(7).sample(raws, max(1, round(len(raws) * args.damage)))
    flip(damaged)
    keyring = Keyring([*Keyring.build([keyring_file], default_keys=False), own.pinned()])
    server = MirrorServer(ArchiveSource(LocalStore(replica), keyring))
    with BackgroundMirror(server) as mirror:
        server.clear_log()
        started = time.perf_counter()
        command = [
            sys.executable, "-m", "pith_archiver", "audit", str(archive), "--repair-from", mirror.url,
            "--keyring", str(keyring_file), "--no-default-keys", "--signing-key", str(own_key), "-q",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)  # noqa: S603 - this checkout's own command
        took = time.perf_counter() - started
        asked = Counter(kind(request.path) for request in server.requests)
    if result.returncode != 0:
        raise SystemExit(f"the repair failed (exit {result.returncode}): {result.stderr[-3000:]}")
    total = sum(asked.values())
    print(json.dumps({"records": len(raws), "damaged": len(damaged), "requests": dict(asked), "seconds": took}))
    print(
        f"| {len(raws):,} raw objects, {len(damaged):,} flipped ({args.damage:.0%}) | {total:,} requests to the peer: "
        f"{asked['raw objects']:,} raw objects, {asked['checkpoints']} checkpoint, {asked['other']} other "
        f"| audit + repair + audit again {took:.0f} s (archive built in {built:.0f} s) |"
    )


if __name__ == "__main__":
    main()
