"""The CDXJ index a WARC writer builds as it writes is the index cdxj-indexer makes of
the finished file, byte for byte: the same lines of the same captures, sorted the same
way, with a bounded amount of memory however many lines a file holds."""

import gzip
import importlib.util
import json
import random
import subprocess
import sys
import tracemalloc
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.capture.cdxj import _PLAIN_URL, SERVER_NOT_MODIFIED, _library_key, sort_index, url_key
from storage.capture.exchanges import Exchange, FetchFailure
from storage.capture.warc import WarcWriter
from storage.capture.warc_salvage import salvage
from tests.plugins.cli import ROOT

RUN_ID = "20261127T000000Z-c0-00000001"


def indexed_by_cdxj_indexer(warc: Path, out: Path) -> str:
    """What cdxj-indexer makes of a finished file: its captures holding a payload (a 304's
    revisit left out, storage.capture.cdxj says why), sorted; its own file name."""
    with warnings.catch_warnings():  # its AMF support imports pkg_resources, deprecated
        warnings.simplefilter("ignore")
        from cdxj_indexer import CDXJIndexer

    class PayloadIndexer(CDXJIndexer):
        def filter_record(self, record):
            not_modified = record.rec_headers.get_header("WARC-Profile") == SERVER_NOT_MODIFIED
            return super().filter_record(record) and not not_modified

    PayloadIndexer(str(out), [str(warc)], sort=True, records="response,revisit").process_all()
    return out.read_text(encoding="utf-8")


def exchange(url: str, status: int, headers: list, body: bytes, when: datetime) -> Exchange:
    return Exchange(url, "GET", [("Accept", "*/*")], b"", status, "HTTP/1.1", headers, body, when)


def every_kind_of_exchange(writer: WarcWriter) -> None:
    """Responses of every shape, revisits of both kinds, failures and verdicts."""
    when = datetime(2026, 11, 27, 1, 2, 3, tzinfo=timezone.utc)
    json_type = [("Content-Type", "application/json")]
    same = json.dumps({"same": "bytes", "pad": "x" * 200}).encode()
    for index in range(12):
        url = f"http://Mirror.Example:8080/pith/R{index:02d}/bundle.json?v={index}&a=b"
        body = json.dumps({"n": index, "pad": "x" * 300}).encode()
        writer.record(exchange(url, 200, json_type, body, when + timedelta(seconds=index)))
        writer.verdict(url, {"status": "verified", "pith_number": f"pith:2019:R{index:02d}", "bundle_sha256": "ab"})
    shapes = [
        (404, [("Content-Type", "text/html; charset=utf-8")], b"<h1>not found</h1>"),
        (200, [("Content-Type", "Application/JSON ; charset=x"), ("Content-Encoding", "gzip")], gzip.compress(same)),
        (200, [("Server", "no type")], b"{}"),  # no Content-Type: no mime field
        (200, [("Content-Type", "")], b"[]"),  # an empty one: an empty mime
        (200, [("Content-Type", "  text/plain\t")], b"padded"),
        (200, [("Content-Type", "text/plain; name=\u00e9t\u00e9")], b"not ascii"),  # percent-encoded in the file
        (200, [("Transfer-Encoding", "chunked"), ("Content-Type", "text/plain")], b"chunked once"),
        (204, [], b""),  # an empty body
        (500, [("Content-Type", "text/plain")], b"boom"),
        (200, json_type, same),
        (200, json_type, same),  # the same payload again: an identical-payload revisit
    ]
    for index, (status, headers, body) in enumerate(shapes):
        url = f"https://registry.example/shape/{index}"
        writer.record(exchange(url, status, headers, body, when + timedelta(minutes=index)))
    writer.record(exchange("https://registry.example/shape/9", 200, json_type, same, when))  # a revisit, same URL
    writer.record(exchange("https://registry.example/elsewhere", 200, json_type, same, when))  # and another URL
    writer.record(exchange("http://mirror.example:notaport/x", 200, json_type, b"null", when))  # keyed as itself
    for url in ("http://Mirror.Example:8080/pith/R03/bundle.json?v=3&a=b", "https://registry.example/unseen"):
        writer.record(exchange(url, 304, [("ETag", '"e"')], b"", when + timedelta(days=1)))  # out of the index
    writer.failure(FetchFailure("https://registry.example/refused", "GET", "ConnectionRefusedError: refused", when))


def write_one_file(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A writer run over every kind of exchange: its WARC file, its unsorted lines, its captures."""
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    finished = []
    writer = WarcWriter(RUN_ID, str(spool_dir), lambda *args: finished.append(args), lambda: None, {})
    every_kind_of_exchange(writer)
    writer.close(None)
    ((_, _, warc, captures, lines, exchanges),) = finished
    assert exchanges == 12 + 11 + 3 + 2 + 1
    return warc, lines, captures


def test_the_index_written_as_the_records_are_is_cdxj_indexers_index_of_the_file(tmp_path):
    warc, lines, captures = write_one_file(tmp_path)
    ours = tmp_path / "ours.cdxj"
    sort_index(lines, ours)
    expected = indexed_by_cdxj_indexer(warc, tmp_path / "theirs.cdxj")
    assert ours.read_text(encoding="utf-8") == expected

    found = [json.loads(line.split(" ", 2)[2]) for line in expected.splitlines()]
    rows = [json.loads(line) for line in captures.read_text().splitlines()]
    assert len(found) == len([row for row in rows if row["fetch_status"] != 304]) == 12 + 11 + 3
    kinds = {(entry["url"], entry.get("mime"), entry["status"]) for entry in found}
    assert ("https://registry.example/shape/0", "text/html", "404") in kinds
    assert ("https://registry.example/shape/1", "Application/JSON", "200") in kinds  # as sent, not lowercased
    assert ("https://registry.example/shape/2", None, "200") in kinds  # no Content-Type: no mime
    assert ("https://registry.example/shape/3", "", "200") in kinds
    assert ("https://registry.example/elsewhere", "warc/revisit", "200") in kinds
    assert sum(entry.get("mime") == "warc/revisit" for entry in found) == 3
    assert not any(entry["status"] == "304" for entry in found)
    assert any(line.startswith("http://mirror.example:notaport/x ") for line in expected.splitlines())


def test_a_salvaged_file_gets_the_same_index_from_its_records(tmp_path):
    """The lines a dead writer spooled are not trusted: salvage builds them again from the file."""
    warc, lines, _ = write_one_file(tmp_path)
    written = tmp_path / "written.cdxj"
    sort_index(lines, written)
    salvaged = tmp_path / "salvaged"
    salvaged.mkdir()
    copy = salvaged / warc.name
    copy.write_bytes(warc.read_bytes())
    _, rebuilt, _ = salvage(copy, str(salvaged))
    again = tmp_path / "again.cdxj"
    sort_index(rebuilt, again)
    assert again.read_text(encoding="utf-8") == written.read_text(encoding="utf-8")


def test_the_sort_merges_bounded_runs_into_the_same_order(tmp_path):
    warc, lines, _ = write_one_file(tmp_path)
    whole = tmp_path / "whole.cdxj"
    sort_index(lines, whole)
    in_runs = tmp_path / "runs.cdxj"
    size = lines.stat().st_size
    sort_index(lines, in_runs, most=size // 7)  # several sorted runs, merged
    assert in_runs.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")
    assert not list(lines.parent.glob("*.run"))  # the runs are gone

    many = tmp_path / "many.lines"  # a large file's worth of lines, in writing order
    picked = random.Random(7)
    text = [f"com,example)/{picked.randrange(10**9):09d} 20261127000000 {{{'x' * 200}}}\n" for _ in range(20_000)]
    many.write_text("".join(text), encoding="utf-8")
    out = tmp_path / "many.cdxj"
    most = 256 * 1024
    tracemalloc.start()
    try:
        sort_index(many, out, most=most)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.read_text(encoding="utf-8") == "".join(sorted(set(text)))
    assert peak < many.stat().st_size / 4, peak  # a few runs' worth, not the file's lines


def test_the_warc_child_carries_neither_cdxj_indexer_nor_fsspec():
    """warcio imports fsspec whenever it is installed (the test environment has it, for
    the release readers); a child of the crawl (``python -m runtime.child_process``)
    refuses it, and the WARC writer's service imports nothing of cdxj-indexer."""
    assert importlib.util.find_spec("fsspec") is not None, "the test environment installs fsspec (datasets)"
    code = """
import runpy, sys
sys.argv = ["child", "-1=storage.capture.warc_child:serve_warc_writer"]  # no socket: stops once imported
try:
    runpy.run_module("storage.runtime.child_process", run_name="__main__", alter_sys=True)
except ValueError:
    pass
import warcio.utils
print(warcio.utils.HAS_FSSPEC, sorted({"fsspec", "cdxj_indexer", "pkg_resources"} & set(sys.modules)))
"""
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout == "False []\n", done.stderr


_ORIGINS = st.sampled_from(
    [
        "http://127.0.0.1:8080",
        "https://www.Example.org",
        "http://WWW3.pith.science:80",
        "https://registry.pith.science:443",
        "http://[::1]:9000",
        "http://xn--bcher-kva.example",
        "https://a_b.example:8443",
    ]
)
# path text the fast way passes on, and the characters that send a URL to the library
_SEGMENTS = st.text(alphabet="aZ09._~-%;=()?#&+ /:@!é", min_size=0, max_size=12)


@settings(max_examples=400, deadline=None)
@given(origin=_ORIGINS, segments=st.lists(_SEGMENTS, min_size=0, max_size=4), tail=st.sampled_from(["", "/"]))
def test_a_plain_urls_key_is_the_surt_librarys(origin, segments, tail):
    url = origin + "".join("/" + segment for segment in segments) + tail
    assert url_key(url) == _library_key(url)


_LABELS = st.one_of(
    st.sampled_from(["www", "WWW2", "xn--bcher-kva", "0x7f", "017", "255", "256", "1", "-a", "a-", "pith", "Science"]),
    st.text(alphabet="aZ09-_", min_size=1, max_size=8),
)
_PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":08080", ":65535", ":99999", ":"])


@settings(max_examples=600, deadline=None)
@given(scheme=st.sampled_from(["http", "https", "HTTP"]), labels=st.lists(_LABELS, min_size=1, max_size=5), port=_PORTS)
def test_an_origins_key_is_the_surt_librarys(scheme, labels, port):
    """The origin's key is worked out without the library where it only lowercases,
    reverses and drops a default port: drawn hosts of every kind it does more to (a www
    prefix, IDNA, numbers it reads as addresses, odd ports) must still key alike."""
    origin = f"{scheme}://{'.'.join(labels)}{port}"
    assert url_key(origin + "/pith/X/bundle.json") == _library_key(origin + "/pith/X/bundle.json"), origin


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.255", "registry.pith.science", "a-b.example"])
def test_a_crawls_origins_are_keyed_without_the_surt_library(host):
    code = f"""
import sys
from storage.capture.cdxj import url_key
print(url_key("http://{host}:8080/pith/X/bundle.json"), "surt" in sys.modules, "tldextract" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    key = ",".join(reversed(host.split("."))) + ":8080)/pith/x/bundle.json"
    assert done.stdout == f"{key} False False\n", done.stderr


def test_the_crawls_own_urls_take_the_fast_way():
    """What the fast way is for: a resolver's record and bundle URLs skip the library."""
    for url in ("http://127.0.0.1:35489/pith/223W742QLAYHLU76TZ7HBO4V36/bundle.json", "https://pith.science/pith/X"):
        assert _PLAIN_URL.fullmatch(url) is not None
        assert url_key(url) == _library_key(url)


def test_a_records_gzip_member_is_as_small_as_with_zlibs_full_window(real_raw):
    """Records are gzipped with a window sized to them (storage.capture.warc_file.gzip_member):
    each inflates back to the record and is no larger than the full window makes it."""
    import zlib

    from storage.capture.warc_file import gzip_member

    small = [b"WARC/1.1\r\nWARC-Type: request\r\n", b"x", bytes(range(256)) * 3, b"a" * 70_000]
    for data in [*real_raw.values(), *small]:
        full = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        member = gzip_member(data)
        assert gzip.decompress(member) == data
        assert len(member) <= len(full.compress(data) + full.flush())
