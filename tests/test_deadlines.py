"""Every HTTP request the project makes outside the crawl ends within its deadline,
however the other side behaves: a receiver on loopback that drips its answer's head a
byte at a time, sends the head and then drips the body, or reads the request and never
answers. The one helper first (``storage.runtime.deadline_http``), then each client through
it, then ``cosign`` and ``crawl --witness-policy`` as a user runs them."""

import re
import socket
import threading
import time
import urllib.request

import pytest

from pith.checkpoint import log_origin
from pith.signed_note import COSIGNATURE_KEY, NOTE_KEY, VerifierKey
from pith.signing import Signer
from pith_archiver.reading.sources import fetch
from pith_archiver.reporting.job_summary import JobSummary
from pith_archiver.reporting.metrics import push_metrics
from pith_archiver.reporting.notify import deliver
from pith_archiver.reporting.side_request import SideRequestBudget
from storage.archive.folder_store import LocalStore
from storage.runtime.deadline_http import DeadlineExceeded, NoAnswer, exchange
from storage.transparency.witness_client import WitnessUnreachable, add_checkpoint_body, post_add_checkpoint
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.listener import closed_port_url
from tests.test_layers import PRODUCT, ROOT

HOSTILE = ["trickle", "trickle_body", "silent"]  # drips the head; sends the head, drips the body; never answers


def no_exchange_left() -> bool:
    """The exchange's own thread ended too: its socket was cut, not merely abandoned."""
    waited = time.monotonic() + 1.0
    while any(thread.name == "deadline-http" for thread in threading.enumerate()):
        if time.monotonic() > waited:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("mode", HOSTILE)
def test_an_exchange_that_reads_the_body_ends_at_its_deadline(hostile_receiver, mode):
    receiver = hostile_receiver(mode, every=0.2)  # each byte well within any per-read timeout
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"^no answer within 1\.0 s$"):
        exchange(urllib.request.Request(receiver.url, data=b"{}", method="POST"), 1.0, max_bytes=100)
    assert 1.0 <= time.monotonic() - started < 1.5
    assert receiver.requests == 1 and no_exchange_left()


def test_a_body_past_the_cap_is_cut_one_byte_past_it_and_an_unread_body_is_never_waited_for(hostile_receiver):
    endless, dripping = hostile_receiver("endless"), hostile_receiver("trickle_body", every=1.0)
    started = time.monotonic()
    capped = exchange(urllib.request.Request(endless.url), 5.0, max_bytes=1000)
    assert (capped.status, len(capped.body)) == (200, 1001)
    head_only = exchange(urllib.request.Request(dripping.url), 5.0)
    assert (head_only.status, head_only.body, head_only.headers["Content-Length"]) == (200, b"", "1000000")
    assert time.monotonic() - started < 1.0 and no_exchange_left()


def test_any_status_is_an_answer_and_a_refused_connection_is_named(listener):
    started = time.monotonic()
    answer = exchange(urllib.request.Request(listener(statuses=[503]).url, data=b"{}", method="POST"), 5.0, 10)
    assert (answer.status, answer.body) == (503, b"")
    with pytest.raises(NoAnswer, match="^Connection refused$") as refused:
        exchange(urllib.request.Request(closed_port_url()), 5.0)
    assert not isinstance(refused.value, DeadlineExceeded) and time.monotonic() - started < 1.0


def replying(*replies: bytes) -> str:
    """A server on loopback that reads one request per reply, sends the reply and closes."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        with server:
            for reply in replies:
                connection, _ = server.accept()
                with connection:
                    connection.recv(65536)
                    connection.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}/"


def test_an_answer_not_in_http_or_cut_short_is_named():
    url = replying(b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
    with pytest.raises(NoAnswer, match=r"^a broken answer \(BadStatusLine: "):
        exchange(urllib.request.Request(url), 5.0, 1000)
    with pytest.raises(NoAnswer, match=r"^a broken answer \(IncompleteRead: .*5 bytes read, 95 more expected"):
        exchange(urllib.request.Request(url), 5.0, 1000)


# --- each client, through the one helper ------------------------------------------------------------


def test_no_product_module_opens_an_http_connection_but_the_one_helper():
    """A client added later goes through ``exchange`` too, or this names it."""
    opening = re.compile(r"\burlopen\b|\bbuild_opener\b|\bhttp\.client\b|\bHTTPS?Connection\b|\bimport requests\b")
    helper = ROOT / "storage" / "runtime" / "deadline_http.py"
    modules = [path for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py")) if path != helper]
    assert [str(path.relative_to(ROOT)) for path in modules if opening.search(path.read_text("utf-8"))] == []


def witness(url: str) -> str | None:
    try:
        post_add_checkpoint(url, add_checkpoint_body(0, [], "note\n"), deadline=1.0)
    except WitnessUnreachable as exc:
        return str(exc)
    return None


def notify(url: str) -> str | None:
    return deliver(url, b"{}", SideRequestBudget(3.0), attempts=1)  # each attempt: a third of the budget


def pushgateway(url: str) -> str | None:
    try:
        push_metrics(url, JobSummary("audit", "archive"), {}, SideRequestBudget(3.0))
    except DeadlineExceeded as exc:
        return str(exc)
    return None


def key_or_bundle_url(url: str) -> str | None:
    """``keys pin URL`` and ``verify URL`` (30 s there)."""
    try:
        fetch(url, 1 << 20, "application/json", seconds=1.0)
    except DeadlineExceeded as exc:
        return str(exc)
    return None


READ_THE_BODY = [witness, key_or_bundle_url]
HEADERS_ONLY = [notify, pushgateway]  # a side request never waits for a body


@pytest.mark.slow
@pytest.mark.parametrize("mode", HOSTILE)
@pytest.mark.parametrize("client", READ_THE_BODY + HEADERS_ONLY, ids=lambda client: client.__name__)
def test_every_client_ends_at_its_deadline_with_a_named_error(hostile_receiver, client, mode):
    receiver = hostile_receiver(mode, every=0.2)
    started = time.monotonic()
    why = client(receiver.url)
    took = time.monotonic() - started
    if mode == "trickle_body" and client in HEADERS_ONLY:
        assert why is None and took < 0.5
    else:
        assert why is not None and "no answer within 1.0 s" in why, why
        assert 1.0 <= took < 1.5
    assert receiver.requests == 1 and no_exchange_left()


def test_a_witness_answering_too_much_is_named_at_once(hostile_receiver):
    url = hostile_receiver("endless").url
    started = time.monotonic()
    assert witness(url) == f"{url}: an answer larger than 65536 bytes"
    assert time.monotonic() - started < 1.0


# --- the commands, as a user runs them ----------------------------------------------------------------


def policy_naming(tmp_path, log_vkey: VerifierKey, witness_url: str):
    cosigner = VerifierKey("witness.test/w1", COSIGNATURE_KEY, Signer.generate("w1").public_raw)
    policy = tmp_path / "policy"
    policy.write_text(f"log {log_vkey}\nwitness w1 {cosigner} {witness_url}\nquorum w1\n")
    return policy


@pytest.mark.slow
def test_cosign_with_a_witness_dripping_its_answer_ends_unmet(
    tmp_path, corpus_dir, corpus_keyring, test_signer, hostile_receiver
):
    store = LocalStore(tmp_path / "archive")
    write_run(store, test_signer, corpus_keyring, list(corpus_raws(corpus_dir).values())[:1])
    origin = log_origin(test_signer.key_id)
    drip = hostile_receiver("trickle", every=1.0)  # a byte a second: never a per-read timeout
    policy = policy_naming(tmp_path, VerifierKey(origin, NOTE_KEY, test_signer.public_raw), drip.url)
    started = time.monotonic()
    result = run_cli("cosign", store.root, "--policy", policy, "--trust-archive-keys", home=tmp_path, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 1, result.output
    assert result.stdout.splitlines() == [
        f"witness_unreachable {origin} w1: {drip.url}: no answer within 10.0 s",
        f"{origin} 1: quorum not met",
    ]
    assert drip.requests == 1


@pytest.mark.slow
def test_a_crawl_whose_witness_drips_ends_after_its_summary(
    tmp_path, corpus_dir, corpus_catalog, mirror, hostile_receiver
):
    key_file = tmp_path / "crawl-key.json"
    signer = Signer.generate("crawl-key")
    signer.save(key_file)
    origin = "archive.test/pith"
    drip = hostile_receiver("trickle", every=1.0)
    policy = policy_naming(tmp_path, VerifierKey(origin, NOTE_KEY, signer.public_raw), drip.url)
    started = time.monotonic()
    crawled = run_cli_crawl(
        tmp_path,
        *("--signing-key", key_file, "--log-origin", origin, "--witness-policy", policy, "--no-follow"),
        *corpus_catalog.suffixes[:3],
        resolver=mirror().url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
        logged=False,
        timeout=90,  # the process must end by itself: run_cli fails the test if it has not
    )
    took = time.monotonic() - started
    assert crawled.returncode == 0, crawled.stderr[-3000:]  # the crawl's own status, as documented
    lines = crawled.stderr.splitlines()
    unmet = lines.index(f"{origin} 3: quorum not met")
    assert lines[unmet - 1] == f"witness_unreachable {origin} w1: {drip.url}: no answer within 10.0 s"
    assert crawled.stdout.splitlines()[-1].startswith("ok (exit 0): done"), crawled.stdout  # the summary
    assert 10 <= took < 60 and drip.requests == 1
