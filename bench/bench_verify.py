"""Verification speed: bundles per second on one core, ours (pith.verify.verify_bundle)
against the plain implementation (bench/plain_verify.py), measured in the same run.

The bundles are minted from the real records (varied source ids, versions, dates and
texts), ~13 KB each like the real ones, and signed by a generated key that both
verifiers pin. Rounds alternate ours, plain and a bare Ed25519 pass (which goes first
rotates), each timed by the CPU time of this process pinned to one core, so that other
work on the machine slows a round's wall clock but not its figure. The medians over
the rounds, and the median of the per-round ratios, are reported.

Run from the repository root:  python bench/bench_verify.py [--bundles 3000] [--rounds 9]
It prints a table and rewrites the "Verification" section of bench/RESULTS.md.
"""

import argparse
import base64
import copy
import gc
import hashlib
import json
import os
import platform
import re
import statistics
import sys
import time
from collections import deque
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test kit: used from the checkout

import nacl  # noqa: E402
import orjson  # noqa: E402
from nacl.bindings import crypto_sign_open  # noqa: E402
from plain_verify import PlainVerifier  # noqa: E402

from pith.keyring import REGISTRY, Keyring  # noqa: E402
from pith.signing import Signer  # noqa: E402
from pith.verify import verify_bundle  # noqa: E402
from pith_archiver import FIXTURES  # noqa: E402
from pith_testkit.mint import mint_bundle  # noqa: E402
from storage.serving.record import compact_json  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Verification"
COMMAND = "python bench/bench_verify.py --bundles {bundles} --rounds {rounds}"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def mint_corpus(count: int, signer: Signer) -> list[bytes]:
    """``count`` distinct bundles shaped like the real ones (a record_created and a
    graph_snapshot event), the real records and snapshots varied per bundle."""
    templates = [json.loads(path.read_bytes()) for path in sorted(FIXTURES.glob("*.bundle.json"))]
    out = []
    for index in range(count):
        real = templates[index % len(templates)]
        year, month = 2015 + index % 10, 1 + index % 12
        arxiv_id = f"{year % 100:02d}{month:02d}.{10000 + index:05d}"
        version = 1 + index % 4
        submitted = f"{year}-{month:02d}-{1 + index % 28:02d}T{index % 24:02d}:{index % 60:02d}:07Z"
        record = copy.deepcopy(real["canonical_record"])
        record["source"].update(id=arxiv_id, version=version)
        record["metadata"].update(
            submitted_at=submitted,
            title_canon_sha256=text_hash(f"title {index}"),
            abstract_canon_sha256=text_hash(f"abstract {index}"),
        )
        snapshot = copy.deepcopy(real["events"][1]["payload"])
        paper = snapshot["graph_snapshot"]["paper"]
        paper.update(title=f"{paper['title']} ({index})", submitted_at=submitted)
        snapshot["graph_snapshot"]["source"].update(id=arxiv_id, version=version)
        created = "2026-05-17T23:47:11Z"
        aliases = [
            {"alias_kind": kind, "alias_value": value, "created_at": created}
            for kind, value in (
                ("arxiv", arxiv_id),
                ("arxiv_version", f"{arxiv_id}v{version}"),
                ("doi", f"10.48550/arxiv.{arxiv_id}"),
            )
        ]
        bundle = mint_bundle(
            signer, record, aliases, [("graph_snapshot", "graph", snapshot)], created, "2026-05-25T22:01:12Z"
        )
        out.append(compact_json(bundle))
    return out


def signed_messages(raw: bytes) -> list[bytes]:
    """The four signatures of a bundle, each followed by the digest it signs (the form
    crypto_sign_open takes), for the Ed25519 floor."""
    bundle = json.loads(raw)
    blocks = [(bundle["events"][0]["payload"]["receipt"], bundle["canonical_sha256"])]
    blocks += [(event["signature"], event["content_sha256"]) for event in bundle["events"]]
    blocks.append((bundle["bundle_signature"], bundle["bundle_signature"]["bundle_sha256"]))
    return [base64.b64decode(sig["signature_b64"]) + bytes.fromhex(digest) for sig, digest in blocks]


def cpu_seconds(work) -> float:
    gc.collect()
    start = time.process_time()
    work()
    return time.process_time() - start


def machine() -> str:
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
        model = found.group(1) if found else model
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{model}, {os.cpu_count()} cores (load average {load} at start); {platform.system()} "
        f"{platform.release()}; Python {platform.python_version()}, orjson {orjson.__version__}, "
        f"PyNaCl {nacl.__version__}"
    )


PACKAGES = ("pith", "pith_archiver", "crawler", "pipelines", "storage", "pith_testkit")


def compiled(root: Path) -> str:
    """Compile the packages of the checkout at ``root`` to bytecode, as ``pip install``
    leaves an installed package, and say so for the report. A checkout run where
    PYTHONDONTWRITEBYTECODE is set (as on this machine) otherwise compiles every module
    it imports at each start: 30-40 ms of ``verify``'s 0.13 s start-up, which a user's
    install never pays; the baselines' libraries are installed, so compiled."""
    import compileall

    for package in PACKAGES:
        if (root / package).is_dir() and not compileall.compile_dir(str(root / package), quiet=1):
            raise SystemExit(f"{root / package} does not compile")
    return "the checkout's packages compiled to bytecode first, as an installed package is"


def bench_arguments(doc: str, rounds: int) -> argparse.ArgumentParser:
    """The options the verification benchmarks share."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    return parser


def main() -> None:
    parser = bench_arguments(__doc__, rounds=9)
    parser.add_argument("--bundles", type=int, default=3000)
    parser.add_argument("--core", type=int, default=None, help="CPU to pin to (default: the last allowed one)")
    args = parser.parse_args()

    core = args.core if args.core is not None else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    signer = Signer.generate("bench-key-1")
    keyring = Keyring([signer.pinned(REGISTRY)])
    plain = PlainVerifier({signer.key_id: signer.public_raw})
    print(f"minting {args.bundles} bundles ...", file=sys.stderr)
    bundles = mint_corpus(args.bundles, signer)
    signed = [message for raw in bundles for message in signed_messages(raw)]
    public = signer.public_raw

    assert all(verify_bundle(raw, keyring).ok for raw in bundles), "ours rejected a minted bundle"
    assert all(plain.verify(raw) is None for raw in bundles), "plain rejected a minted bundle"
    forged = bundles[0].replace(b'"built_at":"2026', b'"built_at":"2027', 1)
    assert verify_bundle(forged, keyring).reason == plain.verify(forged) == "bundle_hash_mismatch"

    # Results are dropped as they come (a kept list of verdicts, which hold the parsed
    # bundles, would make every garbage collection in the run slower for ours alone).
    runs = {
        "ours": lambda: deque(map(partial(verify_bundle, keyring=keyring), bundles), maxlen=0),
        "plain": lambda: deque(map(plain.verify, bundles), maxlen=0),
        "floor": lambda: deque(map(partial(crypto_sign_open, pk=public), signed), maxlen=0),
    }
    rates = {name: [] for name in runs}
    wall = {name: [] for name in runs}
    for round_ in range(args.rounds):
        names = list(runs)[round_ % 3 :] + list(runs)[: round_ % 3]
        for name in names:
            start = time.perf_counter()
            rates[name].append(args.bundles / cpu_seconds(runs[name]))
            wall[name].append(args.bundles / (time.perf_counter() - start))
        print(
            f"round {round_ + 1}/{args.rounds}: " + ", ".join(f"{n} {rates[n][-1]:,.0f}/s" for n in runs),
            file=sys.stderr,
        )

    median = {name: statistics.median(values) for name, values in rates.items()}
    ratio = statistics.median(o / p for o, p in zip(rates["ours"], rates["plain"]))
    size = statistics.median(len(raw) for raw in bundles)
    rows = [
        ("ours (pith.verify.verify_bundle)", median["ours"], statistics.median(wall["ours"]), 1e6 / median["ours"]),
        ("plain (bench/plain_verify.py)", median["plain"], statistics.median(wall["plain"]), 1e6 / median["plain"]),
        (
            "Ed25519 floor (4 x crypto_sign_open)",
            median["floor"],
            statistics.median(wall["floor"]),
            1e6 / median["floor"],
        ),
    ]
    table = [
        "| verifier | bundles/s per core (CPU time) | bundles/s (wall) | µs per bundle |",
        "| --- | ---: | ---: | ---: |",
    ]
    table += [f"| {name} | {cpu:,.0f} | {wall_rate:,.0f} | {micros:,.0f} |" for name, cpu, wall_rate, micros in rows]
    summary = [
        f"**ours / plain = {ratio:.2f}x** (median of the per-round ratios; target: at least 2x). "
        f"Ours spends {1e6 / median['ours'] - 1e6 / median['floor']:,.0f} µs per bundle beyond the four "
        f"signature checks, plain {1e6 / median['plain'] - 1e6 / median['floor']:,.0f} µs; the floor caps "
        f"the ratio any verifier can reach at {median['floor'] / median['plain']:.2f}x.",
    ]
    print("\n".join(table + [""] + summary))
    if not args.no_write:
        write_section(table, summary, args, size, core)


def write_section(table, summary, args, size, core) -> None:
    """Replace this benchmark's section of RESULTS.md, leaving the others as they are."""
    body = "\n".join(
        [
            SECTION,
            "",
            f"{args.bundles:,} distinct minted bundles (median {size:,.0f} bytes, shaped like the real ones: "
            f"a record_created and a graph_snapshot event, four Ed25519 signatures), every one verified by "
            f"both verifiers before timing; {args.rounds} interleaved rounds, process pinned to CPU {core}, "
            f"medians reported.",
            "",
            *table,
            "",
            *summary,
            "",
            f"Machine: {machine()}. Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
            "",
            "Reproduce from the repository root:",
            "",
            "```sh",
            COMMAND.format(bundles=args.bundles, rounds=args.rounds),
            "```",
            "",
        ]
    )
    replace_section(SECTION, body)


def replace_section(section: str, body: str, before: str | None = None) -> None:
    """Put ``body`` in place of ``section`` of RESULTS.md (new: before the section
    ``before``, or at the end), leaving the others as they are."""
    text = RESULTS.read_text("utf-8") if RESULTS.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^{re.escape(section)}\n.*?(?=^## |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: body + "\n", text, count=1)
    elif before and re.search(rf"^{re.escape(before)}\n", text, re.M):
        text = re.sub(rf"^(?={re.escape(before)}\n)", lambda _: body + "\n", text, count=1, flags=re.M)
    else:
        text = text.rstrip("\n") + "\n\n" + body
    RESULTS.write_text(text.rstrip("\n") + "\n", "utf-8")
    print(f"wrote the {section!r} section of {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
