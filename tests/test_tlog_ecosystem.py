"""The archive's logs read, witnessed and checked by tools no one here wrote:
aics-tlog (a C2SP tlog-tiles client) and aics-witness (a C2SP tlog-witness with
SQLite state), from PyPI, in their own Python 3.12 environment (.venv-tlog, which
.ci/run makes). The tiles are read as files and over plain HTTP from the S3 server."""

import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pith.signed_note import (
    COSIGNATURE_KEY,
    NOTE_KEY,
    VerifierKey,
    cosignature_line,
    parse_vkey,
    read_note,
    sign_note,
)
from pith.signing import Signer
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.s3_store import S3Store
from storage.transparency.witness_client import add_checkpoint_body
from storage.witness.service import Witness
from storage.witness.state import WitnessState
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl

TLOG = Path(os.environ.get("PITH_TLOG_BIN", Path(__file__).resolve().parents[1] / ".venv-tlog" / "bin"))

pytestmark = pytest.mark.slow


def aics(tool: str, *args: str) -> subprocess.CompletedProcess:
    if not (TLOG / tool).exists():
        pytest.fail(f"{tool} is not installed in {TLOG}: .ci/run installs it (or set PITH_TLOG_BIN)")
    return subprocess.run([str(TLOG / tool), *args], capture_output=True, text=True, timeout=60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def witnesses(tmp_path):
    """Start witnesses trusting a log: ``start(kind, name, origin, vkey)`` gives
    ``(cosigner vkey, URL)`` of an aics-witness or a ``pith-archiver witness``; all
    are stopped at the end."""
    running = []

    def start(kind: str, name: str, origin: str, vkey: str) -> tuple[str, str]:
        home = tmp_path / name
        home.mkdir()
        if kind == "aics-witness":
            cosigner, url, process = aics_witness(home, name, origin, vkey)
        else:
            cosigner, url, process = our_witness(home, name, vkey)
        running.append(process)
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1) as answer:
                    assert answer.status == 200
                    return cosigner, url
            except OSError:
                assert time.monotonic() < deadline, f"{kind} {name} did not start"
                time.sleep(0.1)

    yield start
    for process in running:
        process.terminate()
        process.wait(timeout=10)


def aics_witness(home: Path, name: str, origin: str, vkey: str) -> tuple[str, str, subprocess.Popen]:
    config = str(home / "witness.json")
    port = free_port()
    made = aics("aics-witness", "init", "--config", config, "--name", f"witness.test/{name}")
    assert made.returncode == 0, made.stderr
    assert aics("aics-witness", "add-log", "--config", config, "--origin", origin, "--vkey", vkey).returncode == 0
    process = subprocess.Popen(
        [str(TLOG / "aics-witness"), "serve", "--config", config, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return made.stdout.split()[0], f"http://127.0.0.1:{port}", process


def our_witness(home: Path, name: str, vkey: str) -> tuple[str, str, subprocess.Popen]:
    Signer.generate(name).save(home / "key.json")
    (home / "policy").write_text(f"log {vkey}\nquorum none\n")
    command = [sys.executable, "-m", "pith_archiver", "witness", "--signing-key", str(home / "key.json")]
    command += ["--policy", str(home / "policy"), "--name", f"witness.test/{name}"]
    command += ["--state", str(home / "state.sqlite"), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready, _, _ = select.select([process.stdout], [], [], 20)
    assert ready, "the witness printed nothing"
    _, cosigner, url = process.stdout.readline().split()
    return cosigner, url, process


def pinned_vkey(archive: str, *options: str) -> tuple[str, str]:
    """``checkpoint --vkey``: the one log's origin and verifier key."""
    printed = run_cli("checkpoint", "--trust-archive-keys", archive, "--vkey", *options)
    assert printed.returncode == 0, printed.output
    [line] = printed.stdout.splitlines()
    origin, vkey = line.split(" ")
    return origin, vkey


@pytest.mark.parametrize("kind", ["aics-witness", "pith-archiver witness"])
def test_aics_clients_verify_witness_and_catch_a_rollback(
    kind, tmp_path, corpus_dir, corpus_keyring, test_signer, witnesses
):
    archive = tmp_path / "archive"
    store = LocalStore(archive)
    raws = list(corpus_raws(corpus_dir).values())
    write_run(store, test_signer, corpus_keyring, raws[:20])
    origin, vkey = pinned_vkey(str(archive))
    assert origin == "pith-archiver/test-key-1" and vkey.startswith(f"{origin}+")
    tiles = str(archive / layout.log_root(test_signer.key_id))
    checked = aics("aics-tlog", "verify-checkpoint", "--tiles", tiles, "--log-key", vkey)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    entry_file = tmp_path / "entry"
    included = aics(
        "aics-tlog",
        "verify-inclusion",
        "--tiles",
        tiles,
        "--log-key",
        vkey,
        "--index",
        "19",
        "--entry-out",
        str(entry_file),
    )
    assert included.returncode == 0, included.stdout + included.stderr
    attestation = json.loads(entry_file.read_bytes())  # the last entry: a storage attestation of a held raw object
    payload = attestation["payload"]
    assert hashlib.sha256(store.get_bytes(payload["raw_path"])).hexdigest() == payload["raw_sha256"]
    assert attestation["signature"]["key_id"] == test_signer.key_id

    w1, url1 = witnesses(kind, "w1", origin, vkey)
    w2, url2 = witnesses(kind, "w2", origin, vkey)
    policy = tmp_path / "policy"
    policy.write_text(
        f"log {vkey}\nwitness w1 {w1} {url1}\nwitness w2 {w2} {url2}\ngroup both all w1 w2\nquorum both\n"
    )
    quorum = ["--witness-key", w1, "--witness-key", w2, "--quorum", "2"]
    cosigned = run_cli("cosign", str(archive), "--policy", str(policy), "--trust-archive-keys")
    assert cosigned.returncode == 0, cosigned.output
    assert f"{origin} 20: quorum met" in cosigned.stdout
    assert aics("aics-tlog", "verify-checkpoint", "--tiles", tiles, "--log-key", vkey, *quorum).returncode == 0
    old = tmp_path / "old-checkpoint"
    old.write_bytes((archive / layout.published_checkpoint(test_signer.key_id)).read_bytes())
    older_copy = tmp_path / "older-copy"
    shutil.copytree(archive, older_copy)

    write_run(store, test_signer, corpus_keyring, raws[20:40])
    again = run_cli("cosign", str(archive), "--policy", str(policy), "--trust-archive-keys")
    assert again.returncode == 0, again.output
    assert f"{origin} 40: quorum met" in again.stdout
    grown = aics(
        "aics-tlog", "verify-consistency", "--tiles", tiles, "--log-key", vkey, "--old-checkpoint", str(old), *quorum
    )
    assert grown.returncode == 0, grown.stdout + grown.stderr
    audit = run_cli("audit", str(archive), "--trust-archive-keys", "--keyring", str(corpus_dir / "keyring.json"))
    assert audit.returncode == 0, audit.output
    saved = run_cli(
        "audit",
        str(archive),
        "--trust-archive-keys",
        "--keyring",
        str(corpus_dir / "keyring.json"),
        "--checkpoint",
        str(old),
    )
    assert saved.returncode == 0, saved.output  # a cosigned checkpoint is a checkpoint

    number = verify_bundle(raws[39], corpus_keyring).pith_number
    proved = run_cli("prove", "--trust-archive-keys", str(archive), number, "--format", "tlog-proof")
    assert proved.returncode == 0 and proved.stdout.startswith("c2sp.org/tlog-proof@v1\nextra "), proved.output
    proof = tmp_path / "last.tlog-proof"
    proof.write_text(proved.stdout)
    offline = run_cli("verify", "--proof", str(proof), "--policy", str(policy))
    assert offline.returncode == 0, offline.output
    assert f"{number} in {origin} at size 40, cosigned by w1, w2" in offline.stdout
    w3 = str(VerifierKey("witness.test/w3", COSIGNATURE_KEY, Signer.generate("w3").public_raw))
    stricter = tmp_path / "policy-3"
    stricter.write_text(
        policy.read_text().replace(
            "group both all w1 w2", f"witness w3 {w3} http://127.0.0.1:9\ngroup both all w1 w2 w3"
        )
    )
    short = run_cli("verify", "--proof", str(proof), "--policy", str(stricter))
    assert short.returncode == 1 and "quorum_unmet" in short.stdout, short.output

    shutil.rmtree(archive)
    shutil.copytree(older_copy, archive)  # an older copy restored in place
    rolled = run_cli("cosign", str(archive), "--policy", str(policy), "--trust-archive-keys")
    assert rolled.returncode == 1, rolled.output
    assert f"log_rolled_back {origin} w1: w1 has seen 40 leaves of {origin}, the archive's log has 20" in rolled.stdout
    assert f"{origin} 20: quorum not met" in rolled.stdout


def test_our_verdicts_on_relayed_notes_are_aics_tlogs(tmp_path, corpus_dir, corpus_keyring, test_signer):
    """A relay edits a cosigned checkpoint: `verify --proof --policy` accepts exactly
    the notes aics-tlog accepts with the witness's key, and `audit --checkpoint` and our
    witness exactly those it accepts with the log's key alone."""
    archive = tmp_path / "archive"
    raws = list(corpus_raws(corpus_dir).values())[:3]
    write_run(LocalStore(archive), test_signer, corpus_keyring, raws)
    origin, vkey = pinned_vkey(str(archive))
    w1 = Signer.from_seed("w1", bytes([7]) * 32)
    cosigner = VerifierKey("witness.test/w1", COSIGNATURE_KEY, w1.public_raw)
    policy = tmp_path / "policy"
    policy.write_text(f"log {vkey}\nwitness w1 {cosigner} http://127.0.0.1:9\nquorum w1\n")
    number = verify_bundle(raws[2], corpus_keyring).pith_number
    proved = run_cli("prove", "--trust-archive-keys", str(archive), number, "--format", "tlog-proof").check()
    head, _, committed = proved.stdout.partition("\n\n")
    text = read_note(committed).text

    def cosigned(text: str, cosigned_text: str | None = None) -> str:
        line = cosignature_line(w1.seed, cosigner.name, cosigned_text or text, 1_700_000_000)
        return sign_note(text, origin, test_signer.seed) + line

    good = cosigned(text)
    notes = {  # what: (note, accepted with the witness's key, accepted with the log's key alone)
        "as cosigned": (good, True, True),
        "with an extension line the log and the witness signed": (cosigned(text + "extension\n"), True, True),
        "with a line of a key no one pinned": (good + cosignature_line(bytes(32), "other.test/k", text, 1), True, True),
        "with the cosignature of another text": (cosigned(text, text + "x\n"), False, True),
        "with a line added after the root": (good.replace(text, text + "added\n"), False, False),
        "without the blank line before the signatures": (good.replace("\n\n", "\n"), False, False),
        "with a line after the signatures": (good + "added by a relay\n", False, False),
        "with the log's line twice": (good + good.split("\n\n")[1].split("\n")[0] + "\n", False, False),
        "with carriage returns": (good.replace("\n", "\r\n"), False, False),
        "with its size in Arabic-Indic digits, signed": (cosigned(text.replace("\n3\n", "\n\u0663\n")), False, False),
    }
    note_file, proof_file = tmp_path / "note", tmp_path / "x.tlog-proof"
    keyring = str(corpus_dir / "keyring.json")
    for at, (what, (note, witnessed, logged)) in enumerate(notes.items()):
        note_file.write_bytes(note.encode())
        proof_file.write_bytes(f"{head}\n\n{note}".encode())
        theirs = aics("aics-tlog", "verify-checkpoint", "--note", str(note_file), "--log-key", vkey)
        theirs_cosigned = aics(
            "aics-tlog", "verify-checkpoint", "--note", str(note_file), "--log-key", vkey,
            "--witness-key", str(cosigner), "--quorum", "1",
        )  # fmt: skip
        ours_cosigned = run_cli("verify", "--proof", proof_file, "--policy", policy)
        audited = run_cli("audit", archive, "--trust-archive-keys", "--keyring", keyring, "--checkpoint", note_file)
        state = WitnessState(tmp_path / f"witness-{at}.sqlite")
        witness = Witness(Signer.from_seed("w", bytes(32)), "witness.test/w", {origin: parse_vkey(vkey)}, state)
        answer = witness.add_checkpoint(add_checkpoint_body(0, [], note))
        state.close()
        assert (theirs_cosigned.returncode == 0, ours_cosigned.returncode == 0) == (witnessed, witnessed), (
            what,
            theirs_cosigned.stdout + theirs_cosigned.stderr,
            ours_cosigned.output,
        )
        assert (theirs.returncode == 0, audited.returncode == 0, answer.status == 200) == (logged,) * 3, (
            what,
            theirs.stdout + theirs.stderr,
            audited.output,
            answer,
        )
        assert ours_cosigned.returncode in (0, 1) and audited.returncode in (0, 1) and answer.status < 500, what


def test_tiles_in_a_bucket_are_read_over_plain_http(
    s3_bucket, s3_endpoint, s3_client, corpus_dir, corpus_keyring, test_signer
):
    """The operator makes the logs (log/*) public, as docs/TRANSPARENCY.md says; a
    client reads them over HTTP without credentials."""
    public = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{s3_bucket}/archive/log/*",
            }
        ],
    }
    s3_client.put_bucket_policy(Bucket=s3_bucket, Policy=json.dumps(public))
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    write_run(store, test_signer, corpus_keyring, list(corpus_raws(corpus_dir).values())[:5])
    origin, vkey = pinned_vkey(f"s3://{s3_bucket}/archive", "--s3-endpoint-url", s3_endpoint)
    tiles = f"{s3_endpoint}/{s3_bucket}/archive/{layout.log_root(test_signer.key_id)}"
    included = aics("aics-tlog", "verify-inclusion", "--tiles", tiles, "--log-key", vkey, "--index", "4")
    assert included.returncode == 0, included.stdout + included.stderr
    assert origin == "pith-archiver/test-key-1"


def test_a_crawl_with_a_witness_policy_publishes_a_cosigned_checkpoint(
    tmp_path, corpus_dir, corpus_catalog, mirror, witnesses
):
    """`crawl --log-origin NAME --witness-policy FILE`: the log is named as asked, and
    the crawl ends by having its checkpoint cosigned, which aics-tlog checks."""
    key_file = tmp_path / "crawl-key.json"
    signer = Signer.generate("crawl-key")
    signer.save(key_file)
    origin = "archive.test/pith"
    vkey = str(VerifierKey(origin, NOTE_KEY, signer.public_raw))
    cosigner, url = witnesses("pith-archiver witness", "w1", origin, vkey)
    policy = tmp_path / "policy"
    policy.write_text(f"log {vkey}\nwitness w1 {cosigner} {url}\nquorum w1\n")
    archive = tmp_path / "archive"
    crawled = run_cli_crawl(
        tmp_path,
        "--signing-key",
        str(key_file),
        "--log-origin",
        origin,
        "--witness-policy",
        str(policy),
        "--no-follow",
        *corpus_catalog.suffixes[:3],
        resolver=mirror().url,
        out=archive,
        corpus=corpus_dir,
    )
    assert crawled.returncode == 0, crawled.stderr[-3000:]
    assert f"{origin} 3: quorum met" in crawled.stderr
    tiles = str(archive / layout.log_root("crawl-key"))
    checked = aics(
        "aics-tlog",
        "verify-checkpoint",
        "--tiles",
        tiles,
        "--log-key",
        vkey,
        "--witness-key",
        cosigner,
        "--quorum",
        "1",
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
