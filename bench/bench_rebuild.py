"""What rebuilding damaged table files from the raw objects costs (``audit
--repair-from`` when no peer holds them): an archive of a minted corpus in one run, the
largest file of ``records``, ``events``, ``aliases`` and ``attestations`` truncated,
then ``audit ARCHIVE --repair-from URL`` run as a subprocess with a peer that cannot be
reached (none is needed). Times a plain audit, and the audit, rebuild and audit again;
checks that pyarrow reads each table's folder as it did before the damage.

    python bench/bench_rebuild.py [--records 10000] [--work DIR]

Prints a row for bench/RESULTS.md.
"""

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_peer_sync import minted_peer  # noqa: E402

from pith.signing import Signer  # noqa: E402
from storage.archive import layout  # noqa: E402

OWN_SEED = bytes(range(9, 41))
TABLES = ("records", "events", "aliases", "attestations")


def rows(archive: Path, table: str) -> int:
    return ds.dataset(archive / layout.TABLES / table, format="parquet", partitioning="hive").count_rows()


def largest(archive: Path, table: str) -> Path:
    return max((archive / layout.TABLES / table).rglob("*.parquet"), key=lambda path: pq.read_metadata(path).num_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-rebuild-"))
    work.mkdir(parents=True, exist_ok=True)
    archive, keyring_file, own_key = (work / n for n in ("archive", "keyring.json", "own-key.json"))
    own = Signer.from_seed("bench-own", OWN_SEED)
    own.save(own_key)
    (work / "own-pinned.json").write_text(json.dumps(own.pinned().document()))
    minted_peer(work, archive, keyring_file, own, args.records)
    before = {table: rows(archive, table) for table in TABLES}
    victims = {table: largest(archive, table) for table in TABLES}
    damaged_rows = sum(pq.read_metadata(path).num_rows for path in victims.values())
    for path in victims.values():
        path.write_bytes(path.read_bytes()[:-100])
    with socket.socket() as sock:  # bound, never listening: a peer that cannot be reached
        sock.bind(("127.0.0.1", 0))
        keys = ["--keyring", str(keyring_file), "--keyring", str(work / "own-pinned.json"), "--no-default-keys"]
        audit = [sys.executable, "-m", "pith_archiver", "audit", str(archive), *keys, "-q"]
        started = time.perf_counter()
        subprocess.run(audit, capture_output=True, cwd=ROOT, check=False)  # noqa: S603 - this checkout's own command
        plain = time.perf_counter() - started
        peer = f"http://127.0.0.1:{sock.getsockname()[1]}"
        started = time.perf_counter()
        command = [*audit, "--repair-from", peer, "--signing-key", str(own_key)]
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)  # noqa: S603 - as above
        took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"the repair failed (exit {result.returncode}): {result.stderr[-3000:]}")
    after = {table: rows(archive, table) for table in TABLES}
    if after != before:
        raise SystemExit(f"the folders read {after} rows, {before} before the damage")
    print(json.dumps({"records": args.records, "damaged_rows": damaged_rows, "audit": plain, "repair": took}))
    print(
        f"| {args.records:,} records, the largest file of {', '.join(TABLES)} truncated ({damaged_rows:,} rows) "
        f"| rebuilt from the raw objects, no peer reachable: audit + rebuild + audit again {took:.0f} s "
        f"(a plain audit {plain:.0f} s); each folder reads as before |"
    )


if __name__ == "__main__":
    main()
