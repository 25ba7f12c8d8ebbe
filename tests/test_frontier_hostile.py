"""Whoever can write to the frontier's Redis cannot steer a worker: an entry is a task
the worker rebuilds with its own request builders, and anything else is refused by
name, counted, and never fetched. A real worker, a real redis-server, our mirror and a
bystander HTTP server (standing for a cloud metadata service) that must never be hit."""

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawler.frontier import RefusedEntry, connect, serializer
from tests.test_frontier import REAL, committed_records, finish, start_worker

SECRET = secrets.token_hex(8)


class Bystander(BaseHTTPRequestHandler):
    """Answers anything with a secret, and notes every request that reached it in ``hits``
    (a list the fixture gives each server)."""

    def answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.hits.append((self.command, self.path, dict(self.headers), body))
        reply = json.dumps({"Token": SECRET}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = answer

    def log_message(self, *args):
        pass


@pytest.fixture
def bystander():
    """``(url, hits)`` of an HTTP server outside the crawl."""
    handler = type("Recording", (Bystander,), {"hits": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.hits
    server.shutdown()
    server.server_close()


def injection(url: str, task: str) -> bytes:
    """The reproduced attack: a request for a host outside the crawl, with allow_offsite,
    a PUT, a metadata-token header and a body, handed to the bundle callback."""
    return json.dumps(
        {
            "url": url + "/latest/api/token",
            "method": "PUT",
            "body": "steal",
            "headers": {"X-aws-ec2-metadata-token-ttl-seconds": ["21600"]},
            "callback": "parse_bundle",
            "dont_filter": True,
            "meta": {"allow_offsite": True, "pith_task": task, "pith_suffix": REAL, "pith_depth": 0},
        }
    ).encode()


def queue(redis_url, task: str, data: bytes, owner_arg: bytes) -> None:
    """Write an entry into the queue as an attacker would: the member and its owner."""
    server = connect(redis_url)
    server.zadd("pith:requests", {task.encode() + b"\n" + data: -50})
    server.hset("pith:owner", task, b"q|ghost|" + owner_arg)


def held_by_dead_worker(redis_url, task: str, owner_arg: bytes) -> None:
    """A task a dead worker held: a survivor takes it over (the recovery path)."""
    server = connect(redis_url)
    server.zadd("pith:workers", {"corpse": 0})
    server.sadd("pith:tasks:corpse", task)
    server.hset("pith:owner", task, b"r|corpse|" + owner_arg)


def test_an_injected_request_reaches_nothing_and_a_well_formed_task_is_archived(
    tmp_path, corpus_dir, corpus_catalog, mirror, redis_url, bystander
):
    other_url, hits = bystander
    server = mirror()
    good, spoilt, other = [s for s in sorted(corpus_catalog.suffixes) if s != REAL][:3]
    hostile = {
        "unknown_field": ("sitemap:x", injection(other_url, "sitemap:x")),
        "unknown_base": (
            "sitemap:" + other_url + "/s.xml",
            json.dumps({"kind": "sitemap", "base": other_url, "path": "/s.xml"}).encode(),
        ),
        "bad_suffix": ("b:../../latest", b'{"kind": "bundle", "suffix": "../../latest", "depth": 0}'),
        "bad_alias": ("alias:x", json.dumps({"kind": "alias", "alias": other_url, "depth": 0}).encode()),
        "task_mismatch": (f"b:{other}", json.dumps({"kind": "page", "suffix": REAL, "depth": 0}).encode()),
        "not_json": ("alias:y", b"\x80\x04\x95pickle"),
    }
    for task, data in hostile.values():
        queue(redis_url, task, data, data)
    queue(redis_url, f"b:{good}", json.dumps({"kind": "bundle", "suffix": good, "depth": 0}).encode(), b"0")
    # the same attack through a dead worker's tasks, which a survivor queues again
    held_by_dead_worker(redis_url, "sitemap:z", injection(other_url, "sitemap:z"))
    held_by_dead_worker(redis_url, "b:../../z", b"0")
    held_by_dead_worker(redis_url, f"b:{spoilt}", b"deep")

    worker = start_worker(tmp_path, "w", server, corpus_dir, redis_url, "--no-follow")
    stats = finish(worker, tmp_path, "w")

    assert hits == []  # nothing reached the bystander
    assert {key.rpartition("/")[2]: n for key, n in stats.items() if key.startswith("pith/frontier_refused/")} == {
        **dict.fromkeys(hostile, 1),
        "unknown_field": 2,
        "bad_suffix": 2,
        "wrong_type": 1,
    }
    log = (tmp_path / "w.log").read_text()
    assert (
        "refused a frontier entry (unknown_field: ['body', 'callback', 'dont_filter', 'headers', 'meta', "
        "'method', 'url'])"
        in log
        and "Traceback" not in log
    )
    # the seed and the well-formed task were archived, nothing else
    assert sorted(committed_records(tmp_path, "w")["w"]) == sorted(
        corpus_catalog.entry(s).pith_number for s in (REAL, good)
    )
    assert not any(SECRET.encode() in path.read_bytes() for path in (tmp_path / "archive").rglob("*") if path.is_file())
    assert connect(redis_url).hlen("pith:owner") == 0  # refused tasks do not linger


@pytest.mark.parametrize(
    "entry, reason",
    [
        (b"[]", "not_an_object"),
        (b'{"kind": "bundle", "suffix": "' + REAL.encode() + b'", "depth": 0, "meta": {}}', "unknown_field"),
        (b'{"kind": "bundle", "suffix": "' + REAL.encode() + b'"}', "missing_field"),
        (b'{"kind": "bundle", "suffix": "' + REAL.encode() + b'", "depth": true}', "wrong_type"),
        (b'{"kind": "bundle", "suffix": "' + REAL.encode() + b'", "depth": -1}', "bad_depth"),
        (b'{"kind": "bundle", "suffix": "' + REAL.lower().encode() + b'", "depth": 0}', "bad_suffix"),
        (b'{"kind": "sitemap", "base": "http://127.0.0.1:1", "path": "/a b.xml"}', "bad_path"),
        (b'{"kind": "sitemap", "base": "http://127.0.0.1:1", "path": "@evil/s.xml"}', "bad_path"),
        (b'{"kind": "sitemap", "base": "http://127.0.0.1:1", "path": "/secrets.json"}', "bad_path"),
        (b'{"kind": "alias", "alias": "../../etc", "depth": 0}', "bad_alias"),
        (b'{"kind": "state", "suffix": "x"}', "unknown_kind"),
        (b'{"kind": "page", "suffix": "' + REAL.encode() + b'", "depth": 0}' + b" " * 5000, "too_large"),
    ],
)
def test_an_entry_that_does_not_fit_the_schema_is_refused_by_name(entry, reason):
    with pytest.raises(RefusedEntry) as refused:
        serializer.loads(entry)
    assert refused.value.reason == reason
