"""Every signed line really signed: the one note reader (``pith.signed_note``) that
`verify --proof`, `audit --checkpoint`, `cosign`, `prove` and the witness go through,
against notes a relayer edited; policies that count keys, not names, with `cosign` and
`verify --proof` held to one verdict over generated policies and cosignature sets
(honest and lying witnesses over HTTP); and numbers at the edges of the grammar."""

import copy
import tempfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pith.attestation import new_attestation
from pith.canonical import canon
from pith.checkpoint import Checkpoint, log_origin, open_checkpoint, uint64
from pith.keyring import REGISTRY, Keyring
from pith.merkle import Tree, leaf_hash
from pith.numbers import PITH_NUMBER_RE
from pith.policy import PolicyError, parse_policy
from pith.reasons import Rejected
from pith.signed_note import COSIGNATURE_KEY, NOTE_KEY, VerifierKey, cosignature_line, read_note, sign_note
from pith.signing import Signer
from pith.tlog_proof import check_tlog_proof, tlog_proof
from pith.verify import verify_bundle
from pith_testkit.mint import mint_bundle
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.serving.record import compact_json
from storage.serving.runner import BackgroundMirror
from storage.transparency.cosign import cosign_log
from storage.witness.server import WitnessServer
from storage.witness.service import Witness
from storage.witness.state import WitnessState
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.listener import handler_server

LOG = Signer.from_seed("log-key", bytes(range(32)))
ORIGIN = log_origin("log-key")
LOG_VKEY = VerifierKey(ORIGIN, NOTE_KEY, LOG.public_raw)
ARABIC = str.maketrans("0123456789", "".join(map(chr, range(0x660, 0x66A))))  # Arabic-Indic digits
STAMP = "2026-06-01T12:00:00Z"
POOL = [Signer.from_seed(f"w{k}", bytes([k + 1]) * 32) for k in range(4)]  # four witness keys


def cosigner(k: int, name: str = "") -> VerifierKey:
    return VerifierKey(name or f"witness.test/w{k}", COSIGNATURE_KEY, POOL[k].public_raw)


def test_a_note_is_its_signed_text_and_signature_lines_only(test_signer, test_keyring):
    origin = "example/archive/test-key-1"
    text = Checkpoint(origin, 5, bytes(32)).text()
    good = sign_note(text, origin, test_signer.seed)
    log_line = good[len(text) + 1 :]
    foreign = cosignature_line(POOL[0].seed, "witness.test/w0", text, 1000)
    accepted = {
        "as signed": good,
        "with a cosignature of a key the reader does not know": good + foreign,
        "with an extension line the log signed": sign_note(text + "extension\n", origin, test_signer.seed),
        "of the largest size": sign_note(text.replace("\n5\n", f"\n{2**64 - 1}\n"), origin, test_signer.seed),
    }
    for what, note in accepted.items():
        assert open_checkpoint(note, test_keyring)[1].key_id == "test-key-1", what
    hostile = {
        "a line added after the root": (good.replace(text, text + "added\n"), "checkpoint_signature_invalid"),
        "no blank line before the signatures": (good.replace("\n\n", "\n"), "checkpoint_invalid"),
        "a line after the signatures": (good + "added by a relay\n", "checkpoint_invalid"),
        "the log's line twice": (good + log_line, "checkpoint_invalid"),
        "carriage returns": (good.replace("\n", "\r\n"), "checkpoint_invalid"),
        "a key name with a plus": (good + foreign.replace("w0", "w+0"), "checkpoint_invalid"),
        "a signature shorter than a key hash": (good + "\u2014 k AAA=\n", "checkpoint_invalid"),
        "a size in other digits, signed": (
            sign_note(text.replace("\n5\n", "\n\u0665\n"), origin, test_signer.seed),
            "checkpoint_invalid",
        ),
        "a size past 2^64, signed": (
            sign_note(text.replace("\n5\n", f"\n{2**64}\n"), origin, test_signer.seed),
            "checkpoint_invalid",
        ),
        "larger than 64 KiB": (good + foreign * 600, "checkpoint_invalid"),
    }
    for what, (note, reason) in hostile.items():
        with pytest.raises(Rejected) as caught:
            open_checkpoint(note, test_keyring)
        assert caught.value.reason == reason, what


def test_numbers_are_ascii_decimals_within_uint64():
    assert [uint64(text) for text in ("0", "7", str(2**64 - 1))] == [0, 7, 2**64 - 1]
    for text in ("", "01", "-1", "+1", " 1", "1 ", str(2**64), "\u00b2", "\u0663\u0660\u0660", "\uff11", "1_0"):
        assert uint64(text) is None, text


def test_a_bundle_dated_in_other_digits_is_refused_and_its_number_is_none(real_docs):
    """``str.isdigit`` took a year in Arabic-Indic digits: a registry could sign a
    Pith number of such a year and have it verified."""
    signer = Signer.from_seed("registry-test", bytes(32))
    record = copy.deepcopy(next(iter(real_docs.values()))["canonical_record"])
    year = record["metadata"]["submitted_at"][:4]
    assert verify_bundle(compact_json(mint_bundle(signer, record, [], [], STAMP, STAMP)), signer_ring(signer)).ok
    record["metadata"]["submitted_at"] = record["metadata"]["submitted_at"].replace(year, year.translate(ARABIC), 1)
    bundle = mint_bundle(signer, record, [], [], STAMP, STAMP)
    verdict = verify_bundle(compact_json(bundle), signer_ring(signer))
    assert (verdict.reason, verdict.path) == ("schema_violation", "canonical_record.metadata.submitted_at")
    assert not PITH_NUMBER_RE.match(bundle["pith_number"])


def signer_ring(signer: Signer) -> Keyring:
    return Keyring([signer.pinned(REGISTRY)])


def test_a_policy_that_names_one_key_twice_is_refused_by_its_line():
    url = "http://127.0.0.1:9"
    head = f"log {LOG_VKEY}\nwitness w1 {cosigner(0)} {url}\n"
    for wrong, why in [
        (
            head + f"witness w1b {cosigner(0)} {url}\ngroup g 2 w1 w1b\nquorum g\n",
            "line 3: witness w1b has the key of w1",
        ),
        (head + f"witness w2 {cosigner(0, 'alias.test/w')} {url}\nquorum w1\n", "line 3: witness w2 has the key of w1"),
        (head + f"log {LOG_VKEY}\nquorum w1\n", f"line 3: the log {ORIGIN} is listed twice"),
        (head + f"witness w2 {cosigner(1)} {url}\ngroup g \u00b2 w1 w2\nquorum g\n", "line 4: group g: threshold"),
        (head + f"witness w2 {cosigner(1)} {url}\ngroup g \u0661 w1 w2\nquorum g\n", "line 4: group g: threshold"),
    ]:
        with pytest.raises(PolicyError) as caught:
            parse_policy(wrong)
        assert str(caught.value).startswith(why), caught.value


# --- cosign and verify --proof: one verdict ---------------------------------------------

ENTRY = canon(
    new_attestation(
        LOG,
        pith_number="pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA",
        archive="archive.test",
        payload={
            "bundle_sha256": "0" * 64,
            "canonical_sha256": "0" * 64,
            "raw_sha256": "0" * 64,
            "raw_path": "raw/x",
            "storage_uri": "file:///x",
            "run_id": "r",
            "size": 1,
            "stored_at": "2026-06-01T12:00:00Z",
        },
        prev_event=None,
        created_at="2026-06-01T12:00:00Z",
    )
)
TREE = Tree([leaf_hash(ENTRY)])
CHECKPOINT = Checkpoint(ORIGIN, 1, TREE.root())
NOTE = sign_note(CHECKPOINT.text(), ORIGIN, LOG.seed)
SIGNING: set[int] = set()  # the witnesses that cosign honestly; the others lie


class Witnesses(BaseHTTPRequestHandler):
    """Four witnesses at /0 to /3: those in SIGNING answer with their cosignature of the
    note's text; the others answer 200 with a cosignature by the next witness's key."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        k = int(self.path.split("/")[1])
        text = read_note(body.partition("\n\n")[2]).text
        signer = k if k in SIGNING else (k + 1) % 4
        line = cosignature_line(POOL[signer].seed, f"witness.test/w{k}", text, 1000).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(line)))
        self.end_headers()
        self.wfile.write(line)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def witness_url():
    with handler_server(Witnesses) as url:
        yield url


@st.composite
def policies(draw):
    """``(key of each witness n0.., groups (name, threshold, members), quorum)``."""
    keys = draw(st.lists(st.integers(0, 3), min_size=1, max_size=5))
    defined, groups = [f"n{j}" for j in range(len(keys))], []
    for g in range(draw(st.integers(0, 3))):
        members = draw(st.lists(st.sampled_from(defined), min_size=1, max_size=4, unique=True))
        threshold = draw(st.sampled_from(["any", "all", *map(str, range(1, len(members) + 1))]))
        groups.append((f"g{g}", threshold, members))
        defined.append(f"g{g}")
    return keys, groups, draw(st.sampled_from([*defined, "none"]))


def expected_verdict(keys, groups, quorum, signing) -> bool:
    met = {f"n{j}": k in signing for j, k in enumerate(keys)} | {"none": True}
    for name, threshold, members in groups:
        need = {"any": 1, "all": len(members)}.get(threshold) or int(threshold)
        met[name] = sum(met[member] for member in members) >= need
    return met[quorum]


def test_a_tlog_proof_holds_only_what_was_signed():
    """The relay's edits that `verify --proof` took for signed (it checked a
    re-serialised checkpoint): each is refused now, by name."""
    policy = parse_policy(f"log {LOG_VKEY}\nwitness w0 {cosigner(0)} http://127.0.0.1:9\nquorum w0\n")
    text = CHECKPOINT.text()
    cosigned = NOTE + cosignature_line(POOL[0].seed, "witness.test/w0", text, 1000)
    assert check_tlog_proof(tlog_proof(ENTRY, 0, [], cosigned), policy)[2] == {"w0"}
    extended = sign_note(text + "extension\n", ORIGIN, LOG.seed)
    for note, reason in [
        (cosigned.replace(text, text + "added\n"), "checkpoint_signature_invalid"),
        (cosigned.replace("\n\n", "\n"), "checkpoint_invalid"),
        (cosigned + "added by a relay\n", "checkpoint_invalid"),
        (extended + cosignature_line(POOL[0].seed, "witness.test/w0", text, 1000), "checkpoint_signature_invalid"),
        (cosigned + cosignature_line(POOL[0].seed, "witness.test/w0", text, 1001), "checkpoint_invalid"),
        (NOTE + cosignature_line(POOL[1].seed, "witness.test/w0", text, 1000), "quorum_unmet"),
    ]:
        with pytest.raises(Rejected) as caught:
            check_tlog_proof(tlog_proof(ENTRY, 0, [], note), policy)
        assert caught.value.reason == reason, note


@pytest.mark.slow
@settings(max_examples=120, deadline=None)
@given(policies(), st.sets(st.integers(0, 3)))
def test_cosign_and_verify_proof_count_keys_and_agree(witness_url, drawn, signing):
    keys, groups, quorum = drawn
    lines = [f"log {LOG_VKEY}", *(f"witness n{j} {cosigner(k)} {witness_url}/{k}" for j, k in enumerate(keys))]
    lines += [f"group {name} {threshold} {' '.join(members)}" for name, threshold, members in groups]
    text = "\n".join([*lines, f"quorum {quorum}"]) + "\n"
    twice = next((j for j, k in enumerate(keys) if k in keys[:j]), None)
    event("a key named twice" if twice is not None else "every key named once")
    if twice is not None:
        with pytest.raises(PolicyError) as caught:
            parse_policy(text)
        assert str(caught.value).startswith(
            f"line {twice + 2}: witness n{twice} has the key of n{keys.index(keys[twice])}"
        )
        return
    policy = parse_policy(text)
    SIGNING.clear()
    SIGNING.update(signing)
    with tempfile.TemporaryDirectory() as folder:
        store = LocalStore(Path(folder))
        outcome = cosign_log(store, "log-key", NOTE, CHECKPOINT, TREE, policy, deadline=5.0)
        assembled = NOTE + "".join(outcome.cosigned[name] for name in sorted(outcome.cosigned))
        published = store.root / layout.published_checkpoint("log-key")
        assert published.exists() == outcome.met
        assert not outcome.met or published.read_text() == assembled
    try:
        check_tlog_proof(tlog_proof(ENTRY, 0, [], assembled), policy)
        verified = True
    except Rejected as exc:
        assert exc.reason == "quorum_unmet", exc
        verified = False
    assert outcome.met == verified == expected_verdict(keys, groups, quorum, signing)
    assert set(outcome.cosigned) == {f"n{j}" for j, k in enumerate(keys) if k in signing}
    liars = {f"n{j}": "witness_refused" for j, k in enumerate(keys) if k not in signing}
    assert {name: code for name, (code, _) in outcome.problems.items()} == liars


# --- the commands ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def archive(tmp_path_factory, corpus_dir, corpus_keyring, test_signer):
    """``(folder, a Pith number it attests, its log's vkey)``: three records archived."""
    folder = tmp_path_factory.mktemp("notes") / "archive"
    raws = list(corpus_raws(corpus_dir).values())[:3]
    write_run(LocalStore(folder), test_signer, corpus_keyring, raws)
    vkey = VerifierKey("pith-archiver/test-key-1", NOTE_KEY, test_signer.public_raw)
    return folder, verify_bundle(raws[2], corpus_keyring).pith_number, vkey


@pytest.mark.slow
def test_verify_proof_reads_the_index_as_ascii_within_uint64(archive, tmp_path):
    folder, number, vkey = archive
    proved = run_cli("prove", "--trust-archive-keys", folder, number, "--format", "tlog-proof").check()
    index = proved.stdout.split("\n")[2]
    policy = tmp_path / "policy"
    policy.write_text(f"log {vkey}\nquorum none\n")
    for written, status in [
        (index, 0),
        ("index \u00b2", 1),
        (index.translate(ARABIC), 1),  # the leaf's own index
        (f"index {2**64}", 1),
        ("index 0" + index[6:], 1),
    ]:
        proof = tmp_path / "x.tlog-proof"
        proof.write_text(proved.stdout.replace(index, written))
        result = run_cli("verify", "--proof", proof, "--policy", policy)
        assert result.returncode == status and "Traceback" not in result.output, (written, result.output)
        assert status == 0 or "schema_violation at proof.index" in result.stdout, result.output


@pytest.mark.slow
def test_prove_refuses_to_embed_a_published_checkpoint_the_log_did_not_sign(archive, tmp_path):
    folder, number, _ = archive
    path = folder / layout.published_checkpoint("test-key-1")
    published = path.read_text()
    text = read_note(published).text
    forged_line = sign_note(text.replace("\n3\n", "\n4\n"), "pith-archiver/test-key-1", bytes(range(32))).split("\n\n")[
        1
    ]
    try:
        for broken, reason in [
            (text + "\n" + forged_line, "checkpoint_signature_invalid"),  # the log's key, another text
            (published.replace(text, text + "added\n"), "checkpoint_signature_invalid"),
            (published + "added by a relay\n", "checkpoint_invalid"),
        ]:
            path.write_text(broken)
            result = run_cli("prove", "--trust-archive-keys", folder, number, "--format", "tlog-proof")
            assert result.returncode == 1 and not result.stdout, result.output
            assert f"{layout.published_checkpoint('test-key-1')}: {reason}" in result.stderr, result.output
    finally:
        path.write_text(published)
    assert run_cli("prove", "--trust-archive-keys", folder, number, "--format", "tlog-proof").returncode == 0


@pytest.mark.slow
def test_cosign_refuses_a_policy_naming_one_witness_key_twice(archive, tmp_path):
    folder, number, vkey = archive
    proof = tmp_path / "x.tlog-proof"
    proof.write_text(run_cli("prove", "--trust-archive-keys", folder, number, "--format", "tlog-proof").check().stdout)
    state = WitnessState(tmp_path / "state.sqlite")
    witness = Witness(POOL[0], "witness.test/w0", {vkey.name: vkey}, state)
    published = (folder / layout.published_checkpoint("test-key-1")).read_bytes()
    with BackgroundMirror(WitnessServer(witness)) as server:
        for alias in (cosigner(0), cosigner(0, "alias.test/w0")):
            policy = tmp_path / "policy"
            policy.write_text(
                f"log {vkey}\nwitness w1 {cosigner(0)} {server.url}\nwitness w1b {alias} {server.url}\n"
                "group both 2 w1 w1b\nquorum both\n"
            )
            cosigned = run_cli("cosign", folder, "--policy", policy, "--trust-archive-keys")
            checked = run_cli("verify", "--proof", proof, "--policy", policy)
            for result in (cosigned, checked):
                assert result.returncode == 2, result.output
                assert "line 3: witness w1b has the key of w1" in result.stderr, result.output
    assert state.view(vkey.name) is None  # the witness was never asked
    assert (folder / layout.published_checkpoint("test-key-1")).read_bytes() == published
    state.close()


@pytest.mark.slow
def test_an_archive_that_cannot_prove_says_so_in_one_escaped_line(archive):
    """prove and checkpoint map what reading an archive raises the same way
    (``archive_reading.reading``): nothing attested is exit 1, its text escaped like
    every other one-line error, since it quotes what the user typed."""
    folder, _, _ = archive
    result = run_cli("prove", "--trust-archive-keys", folder, "10.1234/x\x1b[2J")  # a DOI no record has
    assert result.returncode == 1 and not result.stdout, result.output
    assert "holds no record named 10.1234/x\\u001b[2J" in result.stderr and "\x1b" not in result.stderr
    result = run_cli("prove", "--trust-archive-keys", folder, "pith:2026:AAAAAAAA\x1b[2J")  # no record's name
    assert result.returncode == 2 and "AAAAAAAA\\x1b[2J' is not a Pith number" in result.stderr, result.output
    assert run_cli("checkpoint", "--trust-archive-keys", folder, "--key", "nobody").returncode == 1
