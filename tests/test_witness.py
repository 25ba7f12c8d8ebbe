"""Our tlog-witness (witness/) and the cosign client against hostile counterparts:
a log that goes stale, rolls back, forks or forges; a client that sends too much or
trickles; witnesses that lie, trickle or claim a larger log."""

import hashlib
import socket
import sqlite3
import time
from http.server import BaseHTTPRequestHandler

import pytest

from pith.checkpoint import Checkpoint, log_origin, sign_checkpoint
from pith.merkle import Tree, leaf_hash
from pith.policy import PolicyError, parse_policy
from pith.reasons import Rejected
from pith.signed_note import COSIGNATURE_KEY, NOTE_KEY, VerifierKey, read_note, sign_note, verifies
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.serving.limits import ServerLimits
from storage.serving.runner import BackgroundMirror
from storage.transparency.cosign import cosign_log
from storage.transparency.witness_client import add_checkpoint_body, post_add_checkpoint
from storage.witness.server import WitnessServer
from storage.witness.service import Witness
from storage.witness.state import WitnessState
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.listener import handler_server

LOG = Signer.from_seed("log-key", bytes(range(32)))
FORGER = Signer.from_seed("log-key", bytes(range(1, 33)))
ORIGIN = log_origin("log-key")
LOG_VKEY = VerifierKey(ORIGIN, NOTE_KEY, LOG.public_raw)


def tree_of(size: int, salt: bytes = b"") -> Tree:
    return Tree(leaf_hash(salt + b"entry %d" % i) for i in range(size))


def note_of(tree: Tree, signer: Signer = LOG) -> tuple[str, Checkpoint]:
    checkpoint = Checkpoint(ORIGIN, tree.size, tree.root())
    return sign_checkpoint(checkpoint, signer), checkpoint


def request(old: int, tree: Tree, signer: Signer = LOG) -> bytes:
    note, _ = note_of(tree, signer)
    proof = tree.consistency_proof(old, tree.size) if old else []
    return add_checkpoint_body(old, proof, note)


@pytest.fixture
def witness(tmp_path):
    state = WitnessState(tmp_path / "state.sqlite")
    yield Witness(Signer.from_seed("w", bytes(32)), "witness.test/w", {ORIGIN: LOG_VKEY}, state, clock=lambda: 1000)
    state.close()


def test_the_witness_cosigns_only_a_log_that_grew(witness, tmp_path):
    three, five = tree_of(3), tree_of(5)
    first = witness.add_checkpoint(request(0, three))
    assert first.status == 200
    assert verifies(read_note(note_of(three)[0] + first.body), witness.vkey)
    assert witness.vkey.kind == COSIGNATURE_KEY

    stale = witness.add_checkpoint(request(0, five))
    assert (stale.status, stale.body, stale.content_type) == (409, "3\n", "text/x.tlog.size")
    assert witness.add_checkpoint(request(3, five)).status == 200
    rolled_back = witness.add_checkpoint(add_checkpoint_body(5, [], note_of(tree_of(4))[0]))
    assert rolled_back.status == 400 and "larger than the checkpoint" in rolled_back.body

    other = tree_of(7, b"another history ")
    forked = witness.add_checkpoint(request(5, other))
    assert forked.status == 422
    same_size = witness.add_checkpoint(request(0, tree_of(5, b"rewritten ")))
    assert same_size.status == 409 and same_size.body == "5\n"
    assert [reason for _, reason, _ in witness.state.evidence()] == [
        "not consistent with the 5 leaves held",
        "same size, another root",
    ]
    assert witness.add_checkpoint(request(5, tree_of(6), FORGER)).status == 403
    assert witness.add_checkpoint(request(5, tree_of(6)).replace(b"\n6\n", b"\n7\n")).status == 403  # altered text
    unknown = Witness(witness.signer, witness.name, {}, witness.state)
    assert unknown.add_checkpoint(request(5, tree_of(6))).status == 404
    for garbage in (b"", b"old x\n\nnote\n", b"old 01\n\n" + request(0, three).partition(b"\n\n")[2], b"\xff\xfe"):
        assert witness.add_checkpoint(garbage).status == 400

    witness.state.close()  # the view is durable
    reopened = WitnessState(tmp_path / "state.sqlite")
    assert reopened.view(ORIGIN).size == 5
    reopened.close()


def test_the_witness_cosigns_only_the_text_the_log_signed_and_sizes_it_can_hold(witness):
    note, checkpoint = note_of(tree_of(3))
    text = checkpoint.text()
    for edited, status in [
        (note.replace(text, text + "added\n"), 403),  # a line the log did not sign
        (note.replace("\n\n", "\n"), 400),  # no blank line before the signatures
        (note + "added by a relay\n", 400),  # a line after them that signs nothing
        (note + note.split("\n\n")[1], 403),  # the log's line twice (as aics-witness answers)
        (sign_note(text.replace("\n3\n", f"\n{2**63}\n"), ORIGIN, LOG.seed), 400),  # past SQLite's integers
        (sign_note(text.replace("\n3\n", f"\n{2**64}\n"), ORIGIN, LOG.seed), 400),  # past uint64
        (sign_note(text.replace("\n3\n", "\n\u0663\n"), ORIGIN, LOG.seed), 400),  # 3 in Arabic-Indic digits
    ]:
        answer = witness.add_checkpoint(add_checkpoint_body(0, [], edited))
        assert answer.status == status, (edited, answer)
    for old in ("\u00b2", "\u0660", str(2**64)):
        assert witness.add_checkpoint(f"old {old}\n\n{note}".encode()).status == 400
    assert witness.state.view(ORIGIN) is None
    extended = sign_note(text + "extension\n", ORIGIN, LOG.seed)  # C2SP's extension line, signed
    answer = witness.add_checkpoint(add_checkpoint_body(0, [], extended))
    assert answer.status == 200 and verifies(read_note(extended + answer.body), witness.vkey)
    with pytest.raises(Rejected):  # the cosignature covers the extension line
        verifies(read_note(note + answer.body), witness.vkey)


@pytest.mark.slow
def test_a_witness_that_cannot_store_its_view_answers_500_and_cosigns_nothing(witness, tmp_path):
    """Another process holds the state's write lock (a backup, an sqlite3 shell): the
    witness answers 500 once SQLite gives up waiting, never a dropped connection, and
    hands out no cosignature it did not record."""
    with BackgroundMirror(WitnessServer(witness)) as server:
        assert post_add_checkpoint(server.url, request(0, tree_of(3))).status == 200
        holder = sqlite3.connect(tmp_path / "state.sqlite", isolation_level=None)
        holder.execute("begin exclusive")
        try:
            answer = post_add_checkpoint(server.url, request(3, tree_of(5)))
        finally:
            holder.execute("rollback")
            holder.close()
        assert (answer.status, answer.body) == (500, b"the witness cannot store its view\n")
        assert witness.state.view(ORIGIN).size == 3
        assert post_add_checkpoint(server.url, request(3, tree_of(5))).status == 200  # the lock gone, it moves on


def test_the_witness_server_caps_bodies_and_times_out_tricklers(witness):
    limits = ServerLimits(header_timeout=1.0, body_timeout=0.5, idle_timeout=1.0, send_timeout=1.0, max_body_bytes=4096)
    with BackgroundMirror(WitnessServer(witness, limits=limits)) as server:
        url = server.url
        assert post_add_checkpoint(url, request(0, tree_of(3))).status == 200
        assert post_add_checkpoint(url, b"old 0\n" * 2000).status == 413
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 100\r\n\r\nold")
            started = time.monotonic()
            answer = sock.recv(100)
            assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 3


class Hostile(BaseHTTPRequestHandler):
    """A witness that lies (200, a cosignature of nothing), trickles (a byte at a
    time) or claims a larger log (409 with 999), by the path it is given."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        kind = self.path.split("/")[1]
        if kind == "larger":
            self.send_response(409)
            self.end_headers()
            self.wfile.write(b"999\n")
        elif kind == "liar":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(self.wfile.write("\u2014 witness.test/liar ".encode() + b"A" * 96 + b"\n"))
        else:
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(20):
                    self.wfile.write(b"-")
                    self.wfile.flush()
                    time.sleep(0.2)
            except ConnectionError:  # the client gave up at its deadline, as it must
                return

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile():
    with handler_server(Hostile) as url:
        yield url


@pytest.mark.slow
def test_cosign_names_lying_trickling_and_larger_witnesses_and_publishes_nothing(tmp_path, hostile):
    store = LocalStore(tmp_path / "archive")
    tree = tree_of(4)
    note, checkpoint = note_of(tree)
    keys = {
        name: VerifierKey(f"witness.test/{name}", COSIGNATURE_KEY, hashlib.sha256(name.encode()).digest())
        for name in ("liar", "slow", "larger")
    }
    policy = parse_policy(
        f"log {LOG_VKEY}\n"
        + "".join(f"witness {name} {keys[name]} {hostile}/{name}\n" for name in keys)
        + "group any1 any liar slow larger\nquorum any1\n"
    )
    started = time.monotonic()
    outcome = cosign_log(store, "log-key", note, checkpoint, tree, policy, deadline=1.0)
    assert time.monotonic() - started < 6  # three witnesses, each within its deadline
    assert not outcome.met and not outcome.cosigned
    assert {name: code for name, (code, _) in outcome.problems.items()} == {
        "liar": "witness_refused",
        "slow": "witness_unreachable",
        "larger": "log_rolled_back",
    }
    assert "larger has seen 999 leaves" in outcome.problems["larger"][1]
    assert not (store.root / layout.published_checkpoint("log-key")).exists()


def test_policies_parse_as_the_format_says_and_name_what_is_wrong():
    w1, w2, w3 = (VerifierKey(f"witness.test/{n}", COSIGNATURE_KEY, hashlib.sha256(n.encode()).digest()) for n in "abc")
    text = f"# a comment\nlog {LOG_VKEY} https://log.test/\nwitness a {w1} http://a\nwitness b {w2} http://b\n"
    text += f"witness c {w3} http://c\ngroup two 2 a b c\ngroup top all two c\nquorum top\n"
    policy = parse_policy(text)
    assert set(policy.logs) == {ORIGIN} and policy.witnesses["a"].url == "http://a"
    assert policy.met({"a", "c", "b"}) and policy.met({"a", "b", "c"})
    assert policy.met({"a", "c"}) and not policy.met({"a", "b"}) and not policy.met({"c"}) and not policy.met(set())
    for wrong, why in [
        (text.replace("quorum top\n", ""), "no quorum line"),
        (text.replace("quorum top", "quorum nobody"), "line 8: one quorum line"),
        (text.replace("group two 2", "group two 4"), "line 6: group two: threshold '4'"),
        (text.replace("group top all two c", "group top all two d"), "line 7: group top: members"),
        (
            text.replace(f"witness a {w1}", f"witness a {LOG_VKEY}"),
            f"line 3: {ORIGIN}: a witness needs a vkey of type 4",
        ),
        (text.replace(str(w1), str(w1).replace(w1.key_hash.hex(), "00000000")), "line 3: the vkey of witness.test/a"),
        (text + "frobnicate\n", "line 9: not a policy statement"),
    ]:
        with pytest.raises(PolicyError) as caught:
            parse_policy(wrong)
        assert str(caught.value).startswith(why), caught.value


def test_cosign_usage_errors_are_one_line_and_exit_2(tmp_path, corpus_dir, corpus_keyring, test_signer):
    store = LocalStore(tmp_path / "archive")
    write_run(store, test_signer, corpus_keyring, list(corpus_raws(corpus_dir).values())[:1])
    bad = tmp_path / "bad"
    bad.write_text("quorum w9\n")
    other = tmp_path / "other"
    other.write_text(f"log {LOG_VKEY}\nquorum none\n")  # not this archive's log
    for policy, message in ((bad, "line 1: one quorum line"), (other, "lists none of the logs")):
        result = run_cli("cosign", str(store.root), "--policy", str(policy), "--trust-archive-keys")
        assert result.returncode == 2 and message in result.output and "Traceback" not in result.output
