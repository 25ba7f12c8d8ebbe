"""Every fault mode of the mirror does what it says, over real sockets."""

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from pith.canonical import canon_sha256
from pith.keyring import Keyring
from pith.parse import DEFAULT_MAX_BYTES
from pith.verify import verify_bundle
from pith_testkit.faults import FaultPlan, tamper_canonical_hash
from tests.plugins.cli import run_cli
from tests.plugins.mirror import serve_process

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
BUNDLE = f"/pith/{REAL}/bundle.json"


def connect(url) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=30)


def fetch(url, path, headers=None):
    """(status, headers, body) on a fresh connection; raises what http.client raises."""
    connection = connect(url)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def statuses(url, paths):
    return [fetch(url, path)[0] for path in paths]


def test_latency_delays_each_answer(mirror):
    server = mirror(faults=FaultPlan(latency_ms=300))
    began = time.monotonic()
    assert fetch(server.url, BUNDLE)[0] == 200
    assert time.monotonic() - began >= 0.3  # a lower bound only: never flaky on a slow machine


def test_rate_limit_answers_every_nth_request_with_429_and_retry_after(mirror):
    server = mirror(faults=FaultPlan(rate_limit_every=3, retry_after=7))
    answers = [fetch(server.url, BUNDLE) for _ in range(6)]
    assert [a[0] for a in answers] == [200, 200, 429, 200, 200, 429]
    assert answers[2][1]["Retry-After"] == "7"
    assert [r.fault for r in server.requests] == [None, None, "rate_limit"] * 2


@pytest.mark.parametrize("status", [500, 503])
def test_error_rate_one_answers_every_request_with_the_error_status(mirror, status):
    server = mirror(faults=FaultPlan(error_rate=1.0, error_status=status))
    assert statuses(server.url, [BUNDLE, "/robots.txt", "/pith-mirrors.json"]) == [status] * 3


def test_error_rate_is_seeded_and_reproducible(mirror):
    paths = [BUNDLE] * 40
    runs = [statuses(mirror(faults=FaultPlan(error_rate=0.5, seed=seed)).url, paths) for seed in (4, 4, 5)]
    assert runs[0] == runs[1] != runs[2]
    assert {200, 503} == set(runs[0])


def test_drop_closes_the_connection_without_an_answer(mirror):
    server = mirror(faults=FaultPlan(drop_rate=1.0))
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        fetch(server.url, BUNDLE)
    assert server.requests[-1].status == 0 and server.requests[-1].fault == "drop"


def test_truncate_sends_half_the_body_then_closes(mirror, corpus_dir):
    server = mirror(faults=FaultPlan(truncate_rate=1.0))
    with pytest.raises(http.client.IncompleteRead) as caught:
        fetch(server.url, BUNDLE)
    full = (corpus_dir / "bundles" / f"{REAL}.bundle.json").read_bytes()
    assert caught.value.partial == full[: len(full) // 2]
    assert server.requests[-1].fault == "truncate"


def test_tampered_bundle_fails_verification_with_canonical_hash_mismatch(mirror, corpus_catalog, corpus_keyring):
    target = corpus_catalog.suffixes[0]
    server = mirror(faults=FaultPlan(tamper={target}))
    tampered = fetch(server.url, f"/pith/{target}/bundle.json")
    verdict = verify_bundle(tampered[2], corpus_keyring)
    assert (verdict.reason, verdict.path) == ("canonical_hash_mismatch", "canonical_sha256")
    assert canon_sha256(json.loads(tampered[2])["canonical_record"]) != json.loads(tampered[2])["canonical_sha256"]
    assert verify_bundle(fetch(server.url, f"/pith/{corpus_catalog.suffixes[1]}/bundle.json")[2], corpus_keyring).ok
    assert fetch(server.url, f"/.well-known/pith/{target}/bundle.json")[2] == tampered[2]
    server.set_faults(FaultPlan())
    clean = fetch(server.url, f"/pith/{target}/bundle.json")
    assert verify_bundle(clean[2], corpus_keyring).ok and clean[1]["ETag"] != tampered[1]["ETag"]


def test_tamper_changes_exactly_one_hex_digit():
    raw = b'{"canonical_record":{"metadata":{"title_canon_sha256":"ab"}},"canonical_sha256":"0f1e"}'
    assert tamper_canonical_hash(raw) == raw.replace(b'"canonical_sha256":"0f1e"', b'"canonical_sha256":"1f1e"')


def test_wrong_content_type_serves_json_as_html(mirror):
    server = mirror(faults=FaultPlan(wrong_content_type=True))
    assert fetch(server.url, BUNDLE)[1]["Content-Type"] == "text/html; charset=utf-8"
    assert fetch(server.url, f"/pith/{REAL}")[1]["Content-Type"] == "application/octet-stream"


def test_redirect_loop_never_reaches_the_document(mirror):
    server = mirror(faults=FaultPlan(redirect_loop={REAL}))
    first = fetch(server.url, BUNDLE)
    assert (first[0], first[1]["Location"]) == (302, BUNDLE + "?loop=1")
    assert fetch(server.url, first[1]["Location"])[1]["Location"] == BUNDLE
    with pytest.raises(urllib.error.HTTPError, match="infinite loop"):
        urllib.request.urlopen(server.url + BUNDLE, timeout=30)
    assert fetch(server.url, "/pith/X4GAYROCRDRF6GSWIGUEQCY32W/bundle.json")[0] == 200


def test_oversize_streams_a_body_past_any_sane_limit_without_a_length(mirror):
    size = DEFAULT_MAX_BYTES + 1024 * 1024
    server = mirror(faults=FaultPlan(oversize={REAL}, oversize_bytes=size))
    connection = connect(server.url)
    connection.request("GET", BUNDLE)
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") is None
    received, first = 0, response.read(64)
    assert first.startswith(b'{"bundle_type":"pith_open_graph_bundle"')
    received += len(first)
    while chunk := response.read(1024 * 1024):
        received += len(chunk)
    connection.close()
    assert received == size


def test_fail_first_fails_each_path_n_times_then_succeeds(mirror):
    server = mirror(faults=FaultPlan(fail_first=2, retry_after=3))
    other = "/pith/X4GAYROCRDRF6GSWIGUEQCY32W/bundle.json"
    assert statuses(server.url, [BUNDLE, BUNDLE, other, BUNDLE, other, other]) == [503, 503, 503, 200, 503, 200]
    assert server.requests[0].fault == "fail_first"
    assert fetch(server.url, "/robots.txt")[1]["Retry-After"] == "3"


def test_faults_apply_only_to_matching_paths(mirror):
    server = mirror(faults=FaultPlan(error_rate=1.0, paths=r"/bundle\.json$"))
    assert statuses(server.url, ["/robots.txt", f"/pith/{REAL}", BUNDLE]) == [200, 200, 503]


def test_set_faults_swaps_the_plan_and_restarts_its_counters(mirror):
    server = mirror(faults=FaultPlan(fail_first=1))
    assert statuses(server.url, [BUNDLE, BUNDLE]) == [503, 200]
    server.set_faults(FaultPlan(fail_first=1))
    assert statuses(server.url, [BUNDLE]) == [503]
    server.set_faults(FaultPlan())
    assert statuses(server.url, [BUNDLE]) == [200]


@pytest.mark.parametrize(
    "bad",
    [
        {"error_rate": 1.5},
        {"drop_rate": -0.1},
        {"error_status": 302},
        {"trickle": -1},
        {"latency_ms": -1},
        {"paths": "("},
    ],
)
def test_impossible_plans_are_refused(bad):
    with pytest.raises(ValueError):
        FaultPlan(**bad)


@pytest.mark.slow
def test_serve_options_switch_faults_on(corpus_dir):
    with serve_process(corpus_dir, "--tamper", REAL, "--rate-limit-every", "2", "--retry-after", "5", kit=True) as (
        _,
        url,
    ):
        first = fetch(url, BUNDLE)
        second = fetch(url, BUNDLE)
    assert verify_bundle(first[2], Keyring.default()).reason == "canonical_hash_mismatch"
    assert (second[0], second[1]["Retry-After"]) == (429, "5")


def test_serve_refuses_faults_naming_records_it_does_not_hold(corpus_dir):
    result = run_cli("serve", str(corpus_dir), "--tamper", "A" * 26, kit=True)
    assert result.returncode == 2 and "not records of" in result.output


def test_the_public_serve_has_no_fault_or_virtual_options(corpus_dir):
    for option in ("--tamper", "--latency-ms", "--virtual"):
        result = run_cli("serve", str(corpus_dir), option, REAL)
        assert result.returncode == 2 and "No such option" in result.output and option in result.output
    assert "Fault" not in run_cli("serve", "--help").output


@pytest.mark.slow
def test_serve_options_switch_hostile_modes_on(corpus_dir, corpus_catalog):
    other = sorted(s for s in corpus_catalog.suffixes if s != REAL)[0]
    options = ["--swap-with", REAL, "--misresolve", other]
    with serve_process(corpus_dir, *options, kit=True) as (_, url):
        swapped = fetch(url, f"/pith/{other}/bundle.json")
        misresolved = fetch(url, "/pith/1904.12043")
    assert json.loads(swapped[2])["pith_number"].endswith(REAL)  # another record's bundle, valid
    assert misresolved[0] == 302 and misresolved[1]["Location"] == f"/pith/{other}"
