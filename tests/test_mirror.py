"""The mirror over real sockets: every route, aliases, validators, coding, sitemap,
safety, link-following and the ``serve`` command."""

import calendar
import gzip
import hashlib
import http.client
import json
import re
import shutil
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from email.utils import formatdate
from urllib.robotparser import RobotFileParser

import pytest

from pith.canonical import canon_sha256
from pith.links import links_for
from pith.verify import verify_bundle
from pith_archiver import FIXTURES
from pith_testkit.corpus import corpus_signer
from storage.serving.source import BUNDLES_DIR, KEYRING_NAME
from tests.plugins.cli import run_cli
from tests.plugins.mirror import SMALL_CORPUS_SEED, serve_process

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"  # arXiv 1904.12043v2, a real registry bundle
RECORD_LINK = re.compile(r'href="[^"]*/pith/([A-Z2-7]{26})"')


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def get(url, headers=None, follow=True):
    """(status, headers, body) of a GET; HTTP errors are answers too, not exceptions."""
    opener = urllib.request.build_opener(*(() if follow else (NoRedirect,)))
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def raw_request(url, method, target, headers=None):
    """Send ``target`` exactly as given (no client-side normalization)."""
    host = urllib.parse.urlsplit(url).netloc
    connection = http.client.HTTPConnection(host, timeout=30)
    connection.putrequest(method, target, skip_accept_encoding=True)
    for name, value in (headers or {}).items():
        connection.putheader(name, value)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, response.headers, body


@pytest.fixture
def server(mirror):
    return mirror()


def stored(corpus_dir, suffix) -> bytes:
    return (corpus_dir / BUNDLES_DIR / f"{suffix}.bundle.json").read_bytes()


# --- records -------------------------------------------------------------------------


def test_bundle_is_served_as_its_exact_stored_bytes(server, corpus_dir, corpus_catalog, corpus_keyring):
    for suffix in corpus_catalog.suffixes[:5] + [REAL]:
        status, headers, body = get(f"{server.url}/pith/{suffix}/bundle.json")
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert body == stored(corpus_dir, suffix)
        assert verify_bundle(body, corpus_keyring).ok


def test_well_known_bundle_is_the_same_document(server, corpus_dir, corpus_catalog):
    suffix = corpus_catalog.suffixes[3]
    status, headers, body = get(f"{server.url}/.well-known/pith/{suffix}/bundle.json")
    assert status == 200 and body == stored(corpus_dir, suffix)
    assert headers["ETag"] == get(f"{server.url}/pith/{suffix}/bundle.json")[1]["ETag"]


def test_state_is_the_bundles_state_compact_and_stable(server, corpus_dir, corpus_catalog):
    suffix = corpus_catalog.suffixes[1]
    status, headers, body = get(f"{server.url}/pith/{suffix}/state.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    state = json.loads(stored(corpus_dir, suffix))["state"]
    assert body == json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert canon_sha256({k: v for k, v in json.loads(body).items() if k != "state_sha256"}) == state["state_sha256"]
    assert get(f"{server.url}/pith/{suffix}/state.json")[2] == body


def test_record_page_links_bundle_state_cites_and_cited_by(server, corpus_catalog):
    suffix = next(s for s in corpus_catalog.suffixes if corpus_catalog.cited_by(s) and corpus_catalog.entry(s).cites)
    status, headers, body = get(f"{server.url}/pith/{suffix}")
    page = body.decode("utf-8")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert f'href="{server.url}/pith/{suffix}/bundle.json"' in page
    assert f'href="{server.url}/pith/{suffix}/state.json"' in page
    linked = set(RECORD_LINK.findall(page))
    assert set(corpus_catalog.entry(suffix).cites) | set(corpus_catalog.cited_by(suffix)) <= linked
    count = len(corpus_catalog.cited_by(suffix))
    assert f"<h2>Cited by</h2><p>{count} paper{'' if count == 1 else 's'} in Pith</p>" in page
    assert corpus_catalog.entry(suffix).pith_number in page
    assert "Accept" in headers["Vary"]


def test_real_record_page_shows_what_the_registry_page_shows(server):
    page = get(f"{server.url}/pith/{REAL}")[2].decode("utf-8")
    registry_page = (FIXTURES / f"{REAL}.page.txt").read_text("utf-8")
    for fact in (
        "pith:RLLQL635",
        "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B",
        "Dynamic Mini-batch SGD for Elastic Distributed Training: Learning in the Limbo of Resources",
        "arxiv:1904.12043 v2 · 2019-04-26 · cs.LG · cs.CV · cs.DC · stat.ML",
        "8ad705fb7df8acdce0ed0b0581ee8ae874c821720c471a4e77342528ea10c2f7",
        "download bundle",
        "merged state",
    ):
        assert fact in registry_page and fact in page


def test_jsonld_page_carries_the_canonical_record_and_links(server, corpus_catalog):
    suffix = corpus_catalog.suffixes[0]
    status, headers, body = get(f"{server.url}/pith/{suffix}", {"Accept": "application/ld+json"})
    assert status == 200 and headers["Content-Type"] == "application/ld+json"
    doc = json.loads(body)
    assert canon_sha256(doc["canonical_record"]) == doc["canonical_sha256"]
    assert doc["pith_number"] == corpus_catalog.entry(suffix).pith_number
    assert doc["links"] == links_for(suffix, server.url)
    assert doc["cited_by"] == [links_for(s, server.url)["resolver"] for s in corpus_catalog.cited_by(suffix)]
    assert doc["cites"] == [links_for(s, server.url)["resolver"] for s in corpus_catalog.entry(suffix).cites]


def test_following_links_from_one_record_reaches_every_record(server, corpus_catalog):
    start = corpus_catalog.suffixes[len(corpus_catalog.suffixes) // 2]
    seen, frontier = {start}, [start]
    while frontier:
        page = get(f"{server.url}/pith/{frontier.pop()}")[2].decode("utf-8")
        for suffix in set(RECORD_LINK.findall(page)) - seen:
            seen.add(suffix)
            frontier.append(suffix)
    assert seen == set(corpus_catalog.suffixes)


# --- aliases -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alias",
    [
        "RLLQL635",
        "RLLQL6357CWN",
        "RLLQL6357CWNZYHN",
        "pith:RLLQL635",
        "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B",
        "1904.12043",
        "1904.12043v2",
        "10.48550/arxiv.1904.12043",
        "10.48550%2Farxiv.1904.12043",
        "10.48550/ARXIV.1904.12043",
    ],
)
def test_aliases_redirect_to_the_canonical_url_keeping_the_document(server, alias):
    for tail in ("", "/bundle.json", "/state.json"):
        status, headers, _ = get(f"{server.url}/pith/{alias}{tail}", follow=False)
        assert (status, headers["Location"]) == (301, f"{server.url}/pith/{REAL}{tail}")
    status, headers, _ = get(
        f"{server.url}/resolve?id={urllib.parse.quote(urllib.parse.unquote(alias), safe='')}", follow=False
    )
    assert (status, headers["Location"]) == (301, f"{server.url}/pith/{REAL}")


def test_bare_arxiv_id_names_the_latest_version(server, corpus_catalog):
    versions = {}
    for suffix in corpus_catalog.suffixes:
        arxiv, version = re.fullmatch(
            r"(.+)v(\d+)", next(a for a in corpus_catalog.entry(suffix).aliases if re.search(r"v\d+$", a))
        ).groups()
        versions.setdefault(arxiv, {})[int(version)] = suffix
    arxiv, by_version = next((a, v) for a, v in versions.items() if len(v) > 1)
    for version, suffix in by_version.items():
        assert get(f"{server.url}/pith/{arxiv}v{version}", follow=False)[1]["Location"].endswith(f"/pith/{suffix}")
    latest = by_version[max(by_version)]
    assert get(f"{server.url}/pith/{arxiv}", follow=False)[1]["Location"] == f"{server.url}/pith/{latest}"
    assert get(f"{server.url}/pith/10.48550/arxiv.{arxiv}", follow=False)[1]["Location"] == (
        f"{server.url}/pith/{latest}"
    )


def test_well_known_alias_redirects_to_the_well_known_url(server):
    status, headers, _ = get(f"{server.url}/.well-known/pith/1904.12043v2/bundle.json", follow=False)
    assert (status, headers["Location"]) == (301, f"{server.url}/.well-known/pith/{REAL}/bundle.json")


@pytest.mark.parametrize(
    "path",
    [
        "/pith/ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
        "/pith/rllql6357cwnzyhnbmcyd3uk5b",
        "/pith/RLLQL6357CWNZYHNBMCYD3UK5",
        "/pith/RLLQL63",
        "/pith/pith:2020:RLLQL6357CWNZYHNBMCYD3UK5B",
        "/pith/1904.99999",
        "/pith/",
        "/resolve?id=nothing",
        "/resolve",
        "/pith/RLLQL6357CWNZYHNBMCYD3UK5B/other.json",
        "/.well-known/pith/RLLQL6357CWNZYHNBMCYD3UK5B/state.json",
        "/sitemap-1.xml",
        "/nothing",
    ],
)
def test_unknown_ids_and_paths_are_404(server, path):
    assert get(server.url + path)[0] == 404


# --- safety --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/pith/../keyring.json",
        "/pith/%2e%2e/keyring.json",
        "/pith/..%2Fkeyring.json/bundle.json",
        "/.well-known/pith/..%2F..%2Fkeyring.json/bundle.json",
        "/pith/%2E%2E%2Fbundles%2FRLLQL6357CWNZYHNBMCYD3UK5B",
        "/keyring.json",
        "/corpus.json",
        "/bundles/RLLQL6357CWNZYHNBMCYD3UK5B.bundle.json",
        "/pith/%00/bundle.json",
        "/pith/RLLQL6357CWNZYHNBMCYD3UK5B.bundle.json",
        "//etc/passwd",
        "/pith//etc/passwd",
    ],
)
def test_no_path_reads_outside_the_served_records(server, target):
    status, _, body = raw_request(server.url, "GET", target)
    assert status == 404
    assert b"keys" not in body and b"root:" not in body


def test_other_methods_and_malformed_requests_are_refused(server):
    status, headers, _ = raw_request(server.url, "POST", f"/pith/{REAL}/bundle.json", {"Content-Length": "0"})
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    host = urllib.parse.urlsplit(server.url)
    with socket.create_connection((host.hostname, host.port), timeout=10) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")
    status, _, _ = raw_request(server.url, "GET", f"/pith/{REAL}", {"X-Padding": "x" * 70_000})
    assert status == 431


# --- validators, coding, HEAD, keep-alive -----------------------------------------------


def test_etag_and_last_modified_answer_conditional_requests_with_304(server, corpus_catalog):
    url = f"{server.url}/pith/{corpus_catalog.suffixes[2]}/bundle.json"
    status, headers, body = get(url)
    assert headers["ETag"] == '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    built = corpus_catalog.entry(corpus_catalog.suffixes[2]).built_at
    assert headers["Last-Modified"] == formatdate(
        calendar.timegm(time.strptime(built, "%Y-%m-%dT%H:%M:%SZ")), usegmt=True
    )
    assert get(url, {"If-None-Match": headers["ETag"]})[0] == 304
    assert get(url, {"If-None-Match": f'"other", W/{headers["ETag"]}'})[0] == 304
    assert get(url, {"If-None-Match": '"other"'})[0] == 200
    assert get(url, {"If-Modified-Since": headers["Last-Modified"]})[0] == 304
    assert get(url, {"If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"})[0] == 200
    assert get(url, {"If-None-Match": '"other"', "If-Modified-Since": headers["Last-Modified"]})[0] == 200
    logged = [r for r in server.requests if r.headers.get("if-none-match") == headers["ETag"]]
    assert [r.status for r in logged] == [304]


def test_gzip_when_asked_with_its_own_etag(server, corpus_dir):
    url = f"{server.url}/pith/{REAL}/bundle.json"
    status, headers, body = raw_request(server.url, "GET", f"/pith/{REAL}/bundle.json", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(body) == stored(corpus_dir, REAL)
    plain = get(url)[1]
    assert plain["Content-Encoding"] is None and plain["ETag"] != headers["ETag"]
    assert (
        raw_request(
            server.url,
            "GET",
            f"/pith/{REAL}/bundle.json",
            {"Accept-Encoding": "gzip", "If-None-Match": headers["ETag"]},
        )[0]
        == 304
    )
    assert (
        raw_request(server.url, "GET", f"/pith/{REAL}/bundle.json", {"Accept-Encoding": "gzip;q=0"})[1][
            "Content-Encoding"
        ]
        is None
    )


def test_head_sends_the_headers_without_the_body(server, corpus_dir):
    status, headers, body = raw_request(server.url, "HEAD", f"/pith/{REAL}/bundle.json")
    assert status == 200 and body == b""
    assert int(headers["Content-Length"]) == len(stored(corpus_dir, REAL))


def test_one_connection_carries_many_requests(server, corpus_catalog):
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(server.url).netloc, timeout=30)
    for suffix in corpus_catalog.suffixes[:10]:
        connection.request("GET", f"/pith/{suffix}/bundle.json")
        response = connection.getresponse()
        assert response.status == 200 and response.getheader("Connection") == "keep-alive"
        response.read()
    first_socket = connection.sock
    connection.request("GET", "/robots.txt")
    connection.getresponse().read()
    assert connection.sock is first_socket
    connection.close()


# --- site documents ------------------------------------------------------------------------


def test_signing_key_and_mirror_list(server, corpus_catalog):
    status, headers, body = get(f"{server.url}/pith-signing-key.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == corpus_signer(SMALL_CORPUS_SEED).public_document()
    status, headers, body = get(f"{server.url}/pith-mirrors.json")
    mirror_list = json.loads(body)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert mirror_list["manifest_type"] == "pith_mirror_manifest" and mirror_list["manifest_version"] == "1.0"
    (entry,) = mirror_list["mirrors"]
    assert entry["base_url"] == server.url and entry["status"] == "primary"
    assert {k["key_id"] for k in mirror_list["public_keys"]} == {
        corpus_signer(SMALL_CORPUS_SEED).key_id,
        "pith-v1-2026-05",
    }
    suffix = corpus_catalog.suffixes[0]
    for field, document in (
        ("record_url", None),
        ("bundle_url", "bundle"),
        ("state_url", "state"),
        ("well_known_bundle_url", "bundle"),
    ):
        status, _, _ = get(entry[field].format(suffix=suffix))
        assert status == 200
        assert server.requests[-1].document == (document or "page")


def test_home_page_points_at_the_site_documents(server, corpus_catalog):
    status, headers, body = get(f"{server.url}/")
    page = body.decode("utf-8")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert f"serving {len(corpus_catalog)} records" in page
    for document in ("sitemap.xml", "pith-mirrors.json", "pith-signing-key.json"):
        assert f'href="{server.url}/{document}"' in page


def test_public_url_is_used_in_links(mirror):
    server = mirror(public_url="https://mirror.example")
    mirror_list = json.loads(get(f"{server.url}/pith-mirrors.json")[2])
    assert mirror_list["mirrors"][0]["bundle_url"] == "https://mirror.example/pith/{suffix}/bundle.json"
    assert get(f"{server.url}/pith/1904.12043", follow=False)[1]["Location"] == f"https://mirror.example/pith/{REAL}"


def test_sitemap_lists_every_record_page(server, corpus_catalog):
    status, headers, body = get(f"{server.url}/sitemap.xml")
    assert status == 200 and headers["Content-Type"] == "application/xml"
    locations = re.findall(r"<loc>([^<]+)</loc>", body.decode("utf-8"))
    assert locations == [f"{server.url}/pith/{s}" for s in corpus_catalog.suffixes]
    assert b"<urlset" in body


def test_large_sitemap_becomes_an_index_of_pages(mirror, corpus_catalog):
    server = mirror(sitemap_page_size=10)
    body = get(f"{server.url}/sitemap.xml")[2].decode("utf-8")
    assert "<sitemapindex" in body
    pages = re.findall(r"<loc>([^<]+)</loc>", body)
    assert pages == [f"{server.url}/sitemap-{n}.xml" for n in range(1, len(corpus_catalog) // 10 + 2)]
    listed = []
    for page in pages:
        status, _, text = get(page)
        assert status == 200 and b"<urlset" in text
        listed += re.findall(r"/pith/([A-Z2-7]{26})</loc>", text.decode("utf-8"))
    assert listed == corpus_catalog.suffixes
    assert get(f"{server.url}/sitemap-{len(pages) + 1}.xml")[0] == 404


def test_robots_allows_all_and_names_the_sitemap_or_disallows_what_is_asked(mirror):
    server = mirror(disallow=("/pith/RLLQL6357CWNZYHNBMCYD3UK5B",))
    status, headers, body = get(f"{server.url}/robots.txt")
    assert status == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert f"Sitemap: {server.url}/sitemap.xml" in body.decode()
    robots = RobotFileParser()
    robots.parse(body.decode().splitlines())
    assert not robots.can_fetch("pith-archiver", f"{server.url}/pith/{REAL}/bundle.json")
    assert robots.can_fetch("pith-archiver", f"{server.url}/pith/X4GAYROCRDRF6GSWIGUEQCY32W")


# --- other folders, the command line -------------------------------------------------------


def test_a_folder_of_bundles_alone_is_served(mirror, tmp_path, corpus_dir, corpus_catalog):
    for suffix in corpus_catalog.suffixes[:6] + [REAL]:
        shutil.copy(corpus_dir / BUNDLES_DIR / f"{suffix}.bundle.json", tmp_path)
    (tmp_path / "notes.txt").write_text("not a bundle")
    (tmp_path / "broken.bundle.json").write_text("{")
    server = mirror(tmp_path)
    assert get(f"{server.url}/pith/{corpus_catalog.suffixes[0]}/bundle.json")[0] == 200
    assert get(f"{server.url}/pith/1904.12043", follow=False)[0] == 301
    assert get(f"{server.url}/pith/{corpus_catalog.suffixes[7]}")[0] == 404
    assert len(re.findall(r"<loc>", get(f"{server.url}/sitemap.xml")[2].decode())) == 7


def test_verify_command_reads_bundles_from_the_mirror(server, corpus_dir, corpus_catalog):
    urls = [f"{server.url}/pith/{s}/bundle.json" for s in corpus_catalog.suffixes[:3]]
    result = run_cli("verify", "--keyring", str(corpus_dir / KEYRING_NAME), *urls)
    assert result.returncode == 0 and "3 verified, 0 rejected" in result.output


@pytest.mark.slow
def test_serve_prints_its_url_first_and_stops_on_sigterm(corpus_dir):
    with serve_process(corpus_dir, "--port", "0") as (process, url):
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        assert (
            get(f"{url}/pith/{REAL}/bundle.json")[2] == (corpus_dir / BUNDLES_DIR / f"{REAL}.bundle.json").read_bytes()
        )
    assert process.returncode == 0
