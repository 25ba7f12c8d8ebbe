"""A scheduled run while the registry changes under it, for the figures of docs/OPERATIONS.md.

    python bench/registry_changes.py [--records 2000]

Mints a corpus of N records (plus the real ones) and changes it the way a registry
would: 10% of the records gain an event of one of the six new types, 30% are rebuilt
after a key rotation and signed by a new key, 1% declare a bundle_version this
archiver does not know, and one is rebuilt after the rotation yet signed by the old
key. The resolver (``pith-archiver serve``) announces the new key. Then, as an
operator would:

1. crawl it with the old keyring (and, as the baseline, the same crawl of the
   unchanged corpus, in the same run);
2. pin the new key after "checking it out of band" (``keys pin``), retire the old one
   at the rotation (``keys retire``), and crawl again into the same archive;
3. audit the archive.

Each step prints its exit status, its wall time and what it printed (the summary, the
notices): what the operator reads.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from pith.signing import Signer  # noqa: E402
from pith_testkit.corpus import corpus_signer, generate_corpus  # noqa: E402
from pith_testkit.mint import sign_bundle  # noqa: E402
from storage.serving.record import compact_json  # noqa: E402
from storage.serving.source import BUNDLES_DIR, INDEX_NAME, KEY_DOCUMENT_NAME, KEYRING_NAME  # noqa: E402
from tests.tamper import NEW_EVENT_TYPES, tampered, wholly_resigned, with_new_event  # noqa: E402

SEED = 11
ROTATION = "2026-07-01T00:00:00Z"
REBUILT_AT = "2026-08-01T00:00:00Z"
NEW_KEY = Signer.from_seed("pith-v2-2026-07", hashlib.sha256(b"registry-changes bench: the rotated key").digest())
CLI = [sys.executable, "-m", "pith_archiver"]


def change_registry(corpus: Path) -> dict:
    """Rewrite the corpus's minted bundles in place as the registry would change them."""
    old = corpus_signer(SEED)
    counts = dict.fromkeys(("new_event_type", "rotated", "unknown_version", "retired_key_after_rotation"), 0)
    paths = sorted((corpus / BUNDLES_DIR).glob("*.bundle.json"))
    minted = [p for p in paths if json.loads(p.read_bytes())["bundle_signature"]["key_id"] == old.key_id]
    for index, path in enumerate(minted):
        raw, slot = path.read_bytes(), index % 100
        if slot < 10:
            raw, kind = with_new_event(raw, old, NEW_EVENT_TYPES[index % 6]), "new_event_type"
        elif slot < 40:
            bundle = json.loads(raw)
            bundle["built_at"] = REBUILT_AT
            raw, kind = compact_json(wholly_resigned(bundle, NEW_KEY)), "rotated"
        elif slot == 40:
            raw, kind = tampered(raw, "bundle_version_bumped", old), "unknown_version"
        elif index == 41:
            bundle = json.loads(raw)
            bundle["built_at"] = REBUILT_AT
            raw, kind = compact_json(sign_bundle(bundle, old, REBUILT_AT)), "retired_key_after_rotation"
        else:
            continue
        path.write_bytes(raw)
        counts[kind] += 1
    (corpus / INDEX_NAME).unlink()  # the catalog is rebuilt from the changed bundles
    (corpus / KEY_DOCUMENT_NAME).write_text(json.dumps(NEW_KEY.public_document()))
    counts["records"] = len(paths)
    return counts


class Served:
    def __init__(self, corpus: Path):
        self.process = subprocess.Popen(
            [*CLI, "serve", str(corpus)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.url = self.process.stdout.readline().strip()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait()


def run(step: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env)
    print(f"\n## {step}: exit {done.returncode}, {time.monotonic() - started:.1f} s")
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    print("\n".join(f"    {line}" for line in lines))
    return done


def crawl(url: str, archive: Path, keyring: Path, seeds: Path, env: dict) -> subprocess.CompletedProcess:
    return run(
        f"crawl {archive.name}",
        "crawl",
        "--resolver",
        url,
        "--seeds-file",
        str(seeds),
        "--no-follow",
        "--progress",
        "off",
        "--keyring",
        str(keyring),
        "--out",
        str(archive),
        env=env,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pith-registry-changes-"))
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(work / "config"),
        "XDG_CACHE_HOME": str(work / "cache"),
        "PYTHONPATH": str(ROOT),
    }
    try:
        pristine, changed = work / "pristine", work / "changed"
        generate_corpus(pristine, options.records, SEED)
        shutil.copytree(pristine, changed)
        print(json.dumps({"corpus": change_registry(changed)}))
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(p.name.split(".")[0] for p in sorted((pristine / BUNDLES_DIR).iterdir())) + "\n")
        keyring = work / "keyring.json"
        shutil.copy(pristine / KEYRING_NAME, keyring)
        with Served(pristine) as baseline:
            crawl(baseline.url, work / "baseline-archive", keyring, seeds, env)
        with Served(changed) as registry:
            crawl(registry.url, work / "archive", keyring, seeds, env)
            run(
                "keys pin",
                "keys",
                "pin",
                f"{registry.url}/pith-signing-key.json",
                "--fingerprint",
                NEW_KEY.fingerprint,
                "--not-before",
                ROTATION,
                "--keyring",
                str(keyring),
                env=env,
            )
            run(
                "keys retire",
                "keys",
                "retire",
                corpus_signer(SEED).key_id,
                "--at",
                ROTATION,
                "--keyring",
                str(keyring),
                env=env,
            )
            crawl(registry.url, work / "archive", keyring, seeds, env)
        run("audit", "audit", str(work / "archive"), "--keyring", str(keyring), env=env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
