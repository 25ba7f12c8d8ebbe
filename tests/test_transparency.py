"""Transparency logs: every commit of the real ArchiveWriter signs a checkpoint of its
key's log; proofs of every leaf of trees of 1 to 17 leaves hold under an independent
checker (docs/check_proof.py: hashlib and PyNaCl, no project code) and each kind of
forgery is refused; two workers keep two logs in one archive; `audit --checkpoint`
catches a rollback and a fork; real crawls of the project's mirror give proofs that
the independent checker accepts."""

import ast
import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pith.canonical import canon
from pith.checkpoint import Checkpoint, log_origin, open_checkpoint, parse_checkpoint, sign_checkpoint
from pith.keyring import Keyring
from pith.merkle import Tree, leaf_hash
from pith.proof import check_proof, proof_document
from pith.reasons import Rejected
from pith.signed_note import NOTE_KEY, VerifierKey
from pith.signing import Signer
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests, sign_manifest
from storage.writing.writer import ArchiveWriter
from tests.plugins.archives import FETCHED_AT, corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl

CHECKER = Path(__file__).resolve().parents[1] / "docs" / "check_proof.py"
OTHER = Signer.from_seed("test-key-2", bytes(range(1, 33)))
SIZES = range(1, 18)


def independent_checker():
    """docs/check_proof.py, loaded as a plain module (it imports no project code)."""
    spec = importlib.util.spec_from_file_location("check_proof", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tree = ast.parse(CHECKER.read_text("utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"base64", "hashlib", "json", "sys", "nacl"}
    return module


def logged_run(store, signer, keyring, raws, *, checkpoint_each: bool = False, worker: str = "w0") -> str:
    """One writer archiving ``raws``; with ``checkpoint_each`` a checkpoint commit after each."""
    writer = ArchiveWriter(store, signer, worker=worker, keyring=keyring).open()
    for raw in raws:
        writer.add_verified(raw, verify_bundle(raw, keyring), "http://127.0.0.1/x", FETCHED_AT).result()
        if checkpoint_each:
            writer.commit_interim()
    return writer.commit()


def note_of(store, key_id: str, size: int) -> str:
    return store.get_bytes(layout.checkpoint_at(key_id, size)).decode("utf-8")


def attestations(store, keyring, key_id: str) -> list[dict]:
    """The key's attestations in commit order, from the feeds its manifests list."""
    found = []
    for manifest in sorted(committed_manifests(store, keyring), key=lambda m: m["committed_at"]):
        if manifest["signature"]["key_id"] == key_id:
            for entry in manifest["objects"]:
                if layout.is_attestation_feed(entry["path"]):
                    found += [json.loads(line) for line in store.get_bytes(entry["path"]).splitlines()]
    return found


@pytest.fixture(scope="module")
def seventeen(tmp_path_factory, corpus_dir, corpus_keyring, test_signer):
    """An archive whose writer made a checkpoint commit after each of 17 versions:
    checkpoints of the test key's log at every size from 1 to 17."""
    store = LocalStore(tmp_path_factory.mktemp("tlog") / "archive")
    keyring = Keyring([*corpus_keyring, test_signer.pinned()])
    logged_run(store, test_signer, keyring, list(corpus_raws(corpus_dir).values())[:17], checkpoint_each=True)
    return store, keyring, attestations(store, keyring, test_signer.key_id)


def proofs_of(store, events, key_id: str, size: int) -> list[dict]:
    tree = Tree(leaf_hash(canon(event)) for event in events[:size])
    note = note_of(store, key_id, size)
    return [proof_document(events[index], index, tree.inclusion_proof(index), note, size) for index in range(size)]


def test_each_commit_signs_a_checkpoint_of_the_grown_log(seventeen, test_signer):
    store, keyring, events = seventeen
    assert len(events) == 17
    assert sorted(int(p.path.rpartition("/")[2]) for p in store.list("log/test-key-1/checkpoints/")) == list(SIZES)
    for size in SIZES:
        checkpoint, key = open_checkpoint(note_of(store, test_signer.key_id, size), keyring)
        tree = Tree(leaf_hash(canon(e)) for e in events[:size])
        assert (checkpoint.size, checkpoint.root, key.key_id) == (size, tree.root(), test_signer.key_id)
        assert checkpoint.origin == "pith-archiver/test-key-1"  # not where the archive lies
    # the C2SP format, byte for byte: three lines, a blank line, one signature line
    lines = note_of(store, test_signer.key_id, 3).split("\n")
    assert len(lines) == 6 and lines[1] == "3" and lines[3] == "" and lines[5] == ""
    assert lines[4].startswith("\u2014 " + lines[0] + " ") and len(base64.b64decode(lines[4].split(" ")[2])) == 68


def test_every_leaf_of_every_size_proves_independently(seventeen, test_signer):
    store, keyring, events = seventeen
    checker = independent_checker()
    key_document = test_signer.public_document()
    checked = 0
    for size in SIZES:
        for proof in proofs_of(store, events, test_signer.key_id, size):
            assert checker.check(proof, key_document).endswith(
                f"leaf {proof['leaf_index']} of {size} in the log of test-key-1"
            )
            assert check_proof(proof, keyring).size == size  # the project's own check agrees
            checked += 1
    assert checked == sum(SIZES)


def forgeries(proof: dict, events: list[dict], store, size: int):
    """(what, forged proof) for each way a proof can lie."""
    index = proof["leaf_index"]
    yield "wrong leaf", {**proof, "attestation": events[(index + 1) % size]}
    yield "wrong index", {**proof, "leaf_index": (index + 1) % size}
    yield "wrong size", {**proof, "tree_size": size + 1}
    yield "index past the tree", {**proof, "leaf_index": size}
    if proof["inclusion_proof"]:
        node = bytearray(base64.b64decode(proof["inclusion_proof"][0]))
        node[0] ^= 1
        yield (
            "tampered path",
            {**proof, "inclusion_proof": [base64.b64encode(node).decode(), *proof["inclusion_proof"][1:]]},
        )
        yield "path cut short", {**proof, "inclusion_proof": proof["inclusion_proof"][:-1]}
    checkpoint = parse_checkpoint(proof["checkpoint"].partition("\n\n")[0] + "\n")
    yield "checkpoint signed by another key", {**proof, "checkpoint": sign_checkpoint(checkpoint, OTHER)}
    if size < max(SIZES):  # a genuine checkpoint of another size does not fit this proof
        yield (
            "another checkpoint",
            {**proof, "checkpoint": note_of(store, "test-key-1", size + 1), "tree_size": size + 1},
        )


@pytest.mark.parametrize("size", [1, 2, 5, 8, 13, 17])
def test_forged_proofs_are_refused_by_both_checkers(seventeen, test_signer, size):
    store, keyring, events = seventeen
    checker = independent_checker()
    key_document = test_signer.public_document()
    for proof in proofs_of(store, events, test_signer.key_id, size):
        for what, forged in forgeries(proof, events, store, size):
            if what == "wrong leaf" and size == 1 or what == "wrong index" and size == 1:
                continue  # one leaf: nothing else to point at
            with pytest.raises(checker.ProofRejected):
                checker.check(forged, key_document)
            with pytest.raises(Rejected):
                check_proof(forged, keyring)


def test_the_documented_checkpoint_is_what_the_code_signs():
    """docs/TRANSPARENCY.md shows a real note: the code signs exactly it, and the
    independent checker accepts it (Ed25519 signatures are deterministic)."""
    text = (CHECKER.parent / "TRANSPARENCY.md").read_text("utf-8")
    note = text.split("A checkpoint is a signed note.")[1].split("```\n")[1]
    signer = Signer.from_seed("archiver-1", bytes(range(32)))
    tree = Tree(leaf_hash(hashlib.sha256(b"%d" % i).digest()) for i in range(1042))
    checkpoint = Checkpoint(log_origin("archiver-1", "archive.example.org/pith"), 1042, tree.root())
    assert sign_checkpoint(checkpoint, signer) == note
    assert base64.b64encode(signer.public_raw).decode() in text
    assert f"pith-archiver/archiver-1 {VerifierKey(log_origin('archiver-1'), NOTE_KEY, signer.public_raw)}" in text
    size, root = independent_checker().check_checkpoint(note, signer.public_raw)
    assert (size, root) == (1042, tree.root())


def test_notes_that_are_not_checkpoints_are_named(test_signer, test_keyring):
    good = sign_checkpoint(Checkpoint("example/archive/test-key-1", 5, bytes(32)), test_signer)
    assert open_checkpoint(good, test_keyring)[0].size == 5
    cosigned = good + "\u2014 witness.example AAAAAQ" + "A" * 90 + "\n"
    assert open_checkpoint(cosigned, test_keyring)[0].size == 5  # a witness's cosignature is ignored
    for bad, reason in [
        (good.replace("\n5\n", "\n05\n"), "checkpoint_invalid"),
        (good.replace("\n\n", "\n"), "checkpoint_invalid"),
        (good.replace("\n5\n", "\n6\n"), "checkpoint_signature_invalid"),
        (good.replace("test-key-1\n", "test-key-9\n", 1), "unknown_key"),
        (good[:-1], "checkpoint_invalid"),
        (b"\xff" + good.encode(), "checkpoint_invalid"),
    ]:
        with pytest.raises(Rejected) as caught:
            open_checkpoint(bad, test_keyring)
        assert caught.value.reason == reason, bad


# --- the commands --------------------------------------------------------------------


def key_file(tmp_path, signer) -> str:
    path = tmp_path / f"{signer.key_id}.json"
    path.write_text(json.dumps(signer.public_document()))
    return str(path)


def audit_args(tmp_path, store, signer, corpus_dir) -> list[str]:
    """``audit`` of ``store`` trusting only ``signer``'s key and the corpus's registry keys."""
    return [
        "audit",
        str(store.root),
        "--no-default-keys",
        "--keyring",
        key_file(tmp_path, signer),
        "--keyring",
        str(corpus_dir / "keyring.json"),
    ]


def run_checker(proof_path, keys) -> subprocess.CompletedProcess:
    """docs/check_proof.py as a reader would run it."""
    return subprocess.run(
        [sys.executable, str(CHECKER), str(proof_path), keys], capture_output=True, text=True, check=False
    )


def test_prove_then_verify_offline(tmp_path, corpus_dir, corpus_keyring, test_signer):
    store = LocalStore(tmp_path / "archive")
    raws = list(corpus_raws(corpus_dir).values())
    write_run(store, test_signer, corpus_keyring, raws[:3])
    write_run(store, test_signer, corpus_keyring, raws[3:7])
    number = verify_bundle(raws[4], corpus_keyring).pith_number
    proved = run_cli("prove", "--trust-archive-keys", str(store.root), number, "--json")
    assert proved.returncode == 0, proved.output
    proof = json.loads(proved.stdout)
    assert sorted(proof) == sorted(
        ["pith_number", "attestation", "leaf_index", "tree_size", "inclusion_proof", "checkpoint"]
    )
    assert (proof["pith_number"], proof["leaf_index"], proof["tree_size"]) == (number, 4, 7)
    assert proof["checkpoint"] == note_of(store, test_signer.key_id, 7)
    proof_path = tmp_path / "proof.json"
    proof_path.write_text(proved.stdout)
    keys = key_file(tmp_path, test_signer)

    verified = run_cli("verify", "--proof", str(proof_path), "--keyring", keys)
    assert verified.returncode == 0, verified.output
    assert verified.stdout.startswith(f"VERIFIED    proof  {proof_path}  in ")
    script = run_checker(proof_path, keys)
    assert script.returncode == 0 and script.stdout.endswith("leaf 4 of 7 in the log of test-key-1\n")

    own_key = tmp_path / "config" / "pith-archiver" / "signing-key.json"
    test_signer.save(own_key)  # on the machine that holds the archiver key, no option is needed
    here = run_cli("verify", "--proof", str(proof_path))
    assert here.returncode == 0, here.output
    own_key.unlink()

    proof["leaf_index"] = 3
    proof_path.write_text(json.dumps(proof))
    rejected = run_cli("verify", "--proof", str(proof_path), "--keyring", keys)
    assert rejected.returncode == 1
    assert "inclusion_proof_invalid at proof.inclusion_proof" in rejected.stdout
    script = run_checker(proof_path, keys)
    assert script.returncode == 1 and "does not lead to the checkpoint's root" in script.stderr
    unpinned = run_cli("verify", "--proof", str(proof_path))
    assert unpinned.returncode == 1 and "unknown_key" in unpinned.stdout

    unknown = "pith:2026:" + "A" * 26
    assert run_cli("prove", "--trust-archive-keys", str(store.root), unknown).returncode == 1
    both = run_cli("verify", "--proof", str(proof_path), str(proof_path))
    assert both.returncode == 2 and "not both" in both.output


def test_two_workers_keep_two_logs_and_grow_consistently(tmp_path, corpus_dir, corpus_keyring, test_signer):
    """Workers of a shared crawl commit in turns into one archive: each key's log holds
    its own attestations only, and every saved checkpoint stays consistent."""
    store = LocalStore(tmp_path / "archive")
    keyring = Keyring([*corpus_keyring, test_signer.pinned(), OTHER.pinned()])
    raws = list(corpus_raws(corpus_dir).values())
    keys = ["--keyring", key_file(tmp_path, test_signer), "--keyring", key_file(tmp_path, OTHER)]
    saved = []
    for turn, (signer, part) in enumerate(
        [
            (test_signer, raws[0:3]),
            (OTHER, raws[3:5]),
            (test_signer, raws[5:6]),
            (OTHER, raws[6:10]),
            (test_signer, raws[10:12]),
        ]
    ):
        logged_run(store, signer, keyring, part, worker=f"w{turn % 2}")
        printed = run_cli("checkpoint", "--trust-archive-keys", str(store.root), "--key", signer.key_id)
        assert printed.returncode == 0, printed.output
        saved.append(tmp_path / f"saved-{turn}")
        saved[-1].write_text(printed.stdout)
    for key_id, sizes in (("test-key-1", [3, 4, 6]), ("test-key-2", [2, 6])):
        assert sorted(int(p.path.rpartition("/")[2]) for p in store.list(f"log/{key_id}/checkpoints/")) == sizes
    for manifest in committed_manifests(store, keyring):  # a commit only touches its own key's log
        key_id = manifest["signature"]["key_id"]
        logs = [e["path"] for e in manifest["objects"] if e["path"].startswith("log/")]
        assert logs and all(path.split("/")[1] == key_id for path in logs)
    both = run_cli("checkpoint", "--trust-archive-keys", str(store.root))
    assert both.stdout.count("\n\n") == 3 and "\n6\n" in both.stdout
    audit = run_cli(
        "audit",
        str(store.root),
        "--no-default-keys",
        *keys,
        "--keyring",
        str(corpus_dir / "keyring.json"),
        *[arg for path in saved for arg in ("--checkpoint", str(path))],
    )
    assert audit.returncode == 0, audit.output
    assert audit.stdout.startswith("clean: 5 manifests")


def drop_newest_run(store, keyring, key_id: str, republish: bool = True) -> dict:
    """What a rollback does: the newest run's manifest and every object only it lists
    go, and (``republish``) the log's published checkpoint is the older one again."""
    manifests = sorted(
        (m for m in committed_manifests(store, keyring) if m["signature"]["key_id"] == key_id),
        key=lambda m: m["committed_at"],
    )
    newest = manifests[-1]
    kept = {e["path"] for m in manifests[:-1] for e in m["objects"]}
    for entry in newest["objects"]:
        if entry["path"] not in kept:
            store.delete(entry["path"])
    store.delete(layout.manifest(newest["run_id"]))
    if republish:
        older = max(layout.checkpoint_of(path)[1] for path in kept if layout.checkpoint_of(path))
        store.replace_bytes(layout.published_checkpoint(key_id), store.get_bytes(layout.checkpoint_at(key_id, older)))
    return newest


def test_a_rollback_then_a_fork_are_caught(tmp_path, corpus_dir, corpus_keyring, test_signer):
    store = LocalStore(tmp_path / "archive")
    keyring = Keyring([*corpus_keyring, test_signer.pinned()])
    raws = list(corpus_raws(corpus_dir).values())
    logged_run(store, test_signer, keyring, raws[:3])
    logged_run(store, test_signer, keyring, raws[3:5])
    saved = tmp_path / "witnessed"
    saved.write_text(run_cli("checkpoint", "--trust-archive-keys", str(store.root)).stdout)
    args = [
        *audit_args(tmp_path, store, test_signer, corpus_dir),
        "--checkpoint",
        str(saved),
    ]
    assert run_cli(*args).returncode == 0

    drop_newest_run(store, keyring, test_signer.key_id, republish=False)
    careless = run_cli(*args[:-2])  # the published checkpoint still signs the dropped run
    assert careless.returncode == 1
    assert careless.stdout.startswith(
        "checkpoint_unpublished log/test-key-1/checkpoint test-key-1: signs 5 leaves, the newest committed checkpoint 3"
    )
    store.replace_bytes(layout.published_checkpoint("test-key-1"), note_of(store, "test-key-1", 3).encode())
    plain = run_cli(*args[:-2])
    assert plain.returncode == 0  # without a checkpoint kept outside, a careful rollback leaves no trace
    rolled = run_cli(*args)
    assert rolled.returncode == 1
    assert (
        f"log_rolled_back {saved} test-key-1: the archive's log has 3 leaves, behind the checkpoint's 5"
        in rolled.stdout
    )

    logged_run(store, test_signer, keyring, raws[5:8])  # the log grows again, on another history
    forked = run_cli(*args, "--json")
    assert forked.returncode == 1
    found = json.loads(forked.stdout.splitlines()[0])
    assert found == {
        "code": "log_forked",
        "path": str(saved),
        "detail": "test-key-1: the archive's log of 6 leaves does not extend the checkpoint of 5",
    }

    other = tmp_path / "not-a-checkpoint"
    other.write_text("hello\n")
    assert "checkpoint_invalid" in run_cli(*args[:-1], str(other)).stdout


def test_a_crashed_commits_checkpoint_gives_way(tmp_path, corpus_dir, corpus_keyring, test_signer):
    store = LocalStore(tmp_path / "archive")
    raws = list(corpus_raws(corpus_dir).values())
    write_run(store, test_signer, corpus_keyring, raws[:2])
    store.put_bytes(layout.checkpoint_at(test_signer.key_id, 3), b"left by a crashed commit\n")
    write_run(store, test_signer, corpus_keyring, raws[2:3])
    note = note_of(store, test_signer.key_id, 3)
    assert open_checkpoint(note, Keyring([test_signer.pinned()]))[0].size == 3


def test_the_audit_checks_each_log_against_its_feeds_and_checkpoints(tmp_path, corpus_dir, corpus_keyring, test_signer):
    """An insider swaps two leaf hashes of a level 0 tile and signs the manifest again:
    the tile no longer holds what the feeds give, nor the root its checkpoint signs."""
    store = LocalStore(tmp_path / "archive")
    raws = list(corpus_raws(corpus_dir).values())
    write_run(store, test_signer, corpus_keyring, raws[:2])
    manifest_path = write_run(store, test_signer, corpus_keyring, raws[2:5])
    manifest = json.loads(store.get_bytes(manifest_path))
    tile = "log/test-key-1/tile/0/000.p/5"
    entry = next(e for e in manifest["objects"] if e["path"] == tile)
    leaves = store.get_bytes(tile)
    swapped = leaves[32:64] + leaves[:32] + leaves[64:]
    (store.root / tile).write_bytes(swapped)
    entry.update(sha256=hashlib.sha256(swapped).hexdigest())
    body = {k: v for k, v in manifest.items() if k != "signature"}
    (store.root / manifest_path).write_bytes(canon(sign_manifest(body, test_signer)) + b"\n")
    audit = run_cli(*audit_args(tmp_path, store, test_signer, corpus_dir))
    assert audit.returncode == 1
    assert audit.stdout.splitlines()[:1] == [
        f"tile_mismatch {tile} test-key-1: is not what the log's entries give "
        "(the commit of log/test-key-1/checkpoints/5)",
    ]
    proof = run_cli(
        "prove", "--trust-archive-keys", str(store.root), verify_bundle(raws[3], corpus_keyring).pith_number
    )
    assert proof.returncode == 1 and "log/test-key-1/checkpoints/5 signs 5 leaves" in proof.output


def test_runs_committed_before_logs_were_tiles_are_tiled_by_the_next_commit(
    tmp_path, corpus_dir, corpus_keyring, test_signer
):
    """An archive whose first run committed before logs were tiles (no tiles, no
    checkpoint of the log as it is now): the next commit tiles its attestations too,
    and the archive audits clean."""
    store = LocalStore(tmp_path / "archive")
    raws = list(corpus_raws(corpus_dir).values())
    manifest_path = write_run(store, test_signer, corpus_keyring, raws[:2])
    manifest = json.loads(store.get_bytes(manifest_path))
    for entry in [e for e in manifest["objects"] if e["path"].startswith("log/")]:
        manifest["objects"].remove(entry)
        store.delete(entry["path"])
    store.delete(layout.published_checkpoint(test_signer.key_id))
    body = {k: v for k, v in manifest.items() if k != "signature"}
    (store.root / manifest_path).write_bytes(canon(sign_manifest(body, test_signer)) + b"\n")
    write_run(store, test_signer, corpus_keyring, raws[2:5])
    keyring = Keyring([test_signer.pinned()])
    events = attestations(store, keyring, test_signer.key_id)
    checkpoint, _ = open_checkpoint(note_of(store, test_signer.key_id, 5), keyring)
    assert checkpoint.root == Tree(leaf_hash(canon(e)) for e in events).root()
    assert store.get_bytes("log/test-key-1/tile/entries/000.p/5").count(b'"event_id"') == 5
    proved = run_cli(
        "prove",
        "--trust-archive-keys",
        str(store.root),
        verify_bundle(raws[1], corpus_keyring).pith_number,
        "--json",
    )
    assert proved.returncode == 0, proved.output
    assert (json.loads(proved.stdout)["leaf_index"], json.loads(proved.stdout)["tree_size"]) == (1, 5)
    audit = run_cli(*audit_args(tmp_path, store, test_signer, corpus_dir))
    assert audit.returncode == 0, audit.output


@pytest.mark.slow
def test_a_real_crawl_and_a_rerun_give_a_witnessed_log(tmp_path, corpus_dir, corpus_catalog, mirror):
    """Crawl the project's mirror twice into one archive (the second run finds more):
    the checkpoint kept after the first stays consistent, and a record of the first
    run proves against the newest checkpoint under the independent checker."""
    archive = tmp_path / "archive"
    keys = ["--keyring", str(corpus_dir / "keyring.json"), "--no-default-keys"]
    server = mirror()
    first = run_cli_crawl(
        tmp_path, "--resolver", server.url, *keys, "--out", str(archive), "--no-follow", *corpus_catalog.suffixes[:3]
    )
    assert first.returncode == 0, first.stderr[-3000:]
    kept = tmp_path / "kept-checkpoint"
    kept.write_text(run_cli("checkpoint", "--trust-archive-keys", str(archive)).stdout)
    second = run_cli_crawl(
        tmp_path, "--resolver", server.url, *keys, "--out", str(archive), "--no-follow", *corpus_catalog.suffixes[:6]
    )
    assert second.returncode == 0, second.stderr[-3000:]
    [key_document] = (archive / "keys").glob("*.json")
    audit = run_cli("audit", str(archive), *keys, "--keyring", str(key_document), "--checkpoint", str(kept))
    assert audit.returncode == 0, audit.output
    number = corpus_catalog.entry(corpus_catalog.suffixes[1]).pith_number
    proved = run_cli("prove", "--trust-archive-keys", str(archive), number, "--json")
    assert proved.returncode == 0, proved.output
    proof_path = tmp_path / "proof.json"
    proof_path.write_text(proved.stdout)
    assert json.loads(proved.stdout)["tree_size"] == 6
    script = run_checker(proof_path, str(key_document))
    assert script.returncode == 0, script.stderr
    assert f"{number}: stored as " in script.stdout and " of 6 in the log of " in script.stdout
