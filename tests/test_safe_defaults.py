"""No unsafe defaults: no pickle (or other code-carrying format) for data that crosses
a network, no shell command built from input, no eval; the mirror never serves a byte
from outside the records it was given, whatever the request path; and the archiver's
signing key and the S3 secret never reach a log line, the stats or the archive."""

import ast
import base64
import json
import pickle
import shutil
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from crawler.frontier import RefusedEntry, frontier_settings
from pith_archiver import FIXTURES
from storage.archive.s3_store import S3Store
from tests.plugins.cli import signing_key
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.mirror import serve_process

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pith", "crawler", "pipelines", "storage", "pith_archiver", "bench")
CODE_CARRYING_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle"}
DANGEROUS_CALLS = {
    "eval",
    "exec",
    "os.system",
    "os.popen",
    "pickle.loads",
    "pickle.load",
    "yaml.load",
    "marshal.loads",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
}
REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"


def _name(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def unsafe_uses(source: str, filename: str = "<source>") -> list[str]:
    """Imports of code-carrying serializers, eval/exec/os.system-like calls, and any call
    passing ``shell=True`` (a shell command line built from its arguments)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [
                f"{filename}:{node.lineno}: imports {n}" for n in names if n.split(".")[0] in CODE_CARRYING_MODULES
            ]
        elif isinstance(node, ast.Call):
            if _name(node.func) in DANGEROUS_CALLS:
                found.append(f"{filename}:{node.lineno}: calls {_name(node.func)}")
            if any(
                k.arg == "shell" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords
            ):
                found.append(f"{filename}:{node.lineno}: {_name(node.func)}(shell=...)")
    return found


def test_the_scan_finds_what_it_looks_for():
    bad = (
        "import pickle\nfrom marshal import loads\nimport os, subprocess\n"
        "eval(x)\nos.system('ls ' + name)\nsubprocess.run(cmd, shell=True)\nsubprocess.run(cmd, shell=False)\n"
    )
    assert [line.split(": ", 1)[1] for line in unsafe_uses(bad)] == [
        "imports pickle",
        "imports marshal",
        "calls eval",
        "calls os.system",
        "subprocess.run(shell=...)",
    ]


def test_no_code_carrying_formats_shell_commands_or_eval_in_the_source_tree():
    files = [path for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 40
    found = [use for path in files for use in unsafe_uses(path.read_text("utf-8"), str(path.relative_to(ROOT)))]
    assert found == []


def test_the_shared_frontier_carries_json_never_pickle():
    """A Redis frontier is shared over the network: whoever can write to it must not be
    able to run code in a crawler (Scrapy's own JOBDIR queue pickles, but to a local
    folder of this user's; see docs/RELIABILITY.md)."""
    settings = frontier_settings("redis://127.0.0.1:6379/0")
    serializer = __import__(settings["SCHEDULER_SERIALIZER"], fromlist=["loads"])
    with pytest.raises(RefusedEntry, match="not_json"):
        serializer.loads(pickle.dumps({"url": "http://127.0.0.1/", "callback": "parse_bundle"}))
    task = {"kind": "page", "suffix": "RLLQL6357CWNZYHNBMCYD3UK5B", "depth": 1}
    assert json.loads(serializer.dumps(task)) == task


# --- the mirror serves its records and nothing else ------------------------------------------


def raw_get(url: str, target: bytes) -> tuple[int, bytes]:
    """Send ``target`` byte for byte on a fresh socket; (status, body)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


ESCAPES = [
    b"/../outside/secret.json",
    b"/pith/../../outside/secret.json",
    b"/pith/..%2F..%2Foutside%2Fsecret.json",
    b"/pith/%2e%2e/%2e%2e/outside/secret.json",
    b"/pith/%252e%252e%252f%252e%252e%252foutside%252fsecret.json",
    b"/.well-known/pith/..%2f..%2foutside%2fsecret.json/bundle.json",
    b"/pith/..\\..\\outside\\secret.json",
    b"/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/bundle.json",
    b"/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA",
    b"/bundles/AAAAAAAAAAAAAAAAAAAAAAAAAA.bundle.json",
    b"/keyring.json",
    b"/corpus.json",
    b"/secret.json",
    b"/pith/" + REAL.encode() + b"%00/bundle.json",
    b"/pith/" + REAL.encode() + b"/../../outside/secret.json",
    b"http://127.0.0.1/../outside/secret.json",
    b"//outside/secret.json",
    b"/%2e%2e/outside/secret.json",
]


@pytest.fixture(params=["corpus", "archive"])
def planted(request, tmp_path):
    """A folder of the real bundles (a corpus, or an archive a crawl wrote), holding a
    secret, and a symlink named like a bundle pointing to a secret outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text('{"api_key": "PLANTED-SECRET"}')
    folder = tmp_path / "served"
    if request.param == "corpus":
        folder.mkdir()
        for path in FIXTURES.glob("*.bundle.json"):
            shutil.copy(path, folder)
    else:
        base, suffixes, _ = request.getfixturevalue("static_site")
        crawled = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(folder))
        assert crawled.returncode == 0, crawled.stderr[-3000:]
    (folder / "secret.json").write_text('{"api_key": "PLANTED-SECRET"}')
    (folder / "AAAAAAAAAAAAAAAAAAAAAAAAAA.bundle.json").symlink_to(outside / "secret.json")
    return folder


@pytest.mark.slow
def test_the_mirror_never_serves_outside_its_records(planted):
    with serve_process(planted) as (_, url):
        assert raw_get(url, f"/pith/{REAL}/bundle.json".encode())[0] == 200  # it does serve its records
        answers = {target: raw_get(url, target) for target in ESCAPES}
    leaked = [target for target, (status, body) in answers.items() if b"PLANTED-SECRET" in body or status == 200]
    assert leaked == []
    assert {status for status, _ in answers.values()} <= {400, 404}


# --- secrets never logged -------------------------------------------------------------------------


def spellings(secret: bytes) -> list[str]:
    return [
        secret.hex(),
        base64.b64encode(secret).decode(),
        base64.urlsafe_b64encode(secret).decode().rstrip("="),
        base64.b32encode(secret).decode().rstrip("="),
    ]


def test_no_secret_reaches_a_log_line_the_stats_or_the_archive(tmp_path, static_site, s3_endpoint, s3_bucket):
    """At DEBUG, with boto3's own logging on: the archiver's signing seed and the S3
    secret key appear in no output, no stats, and no archived object."""
    base, suffixes, _ = static_site
    key_file = signing_key(tmp_path / "keys" / "archiver.json")
    result = run_cli_crawl(
        tmp_path,
        "--resolver",
        base,
        suffixes[0],
        "--signing-key",
        str(key_file),
        "--out",
        f"s3://{s3_bucket}/archive",
        "--s3-endpoint-url",
        s3_endpoint,
        "-s",
        "LOG_LEVEL=DEBUG",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "botocore" in result.stderr  # the S3 client did log, at length
    assert key_file.stat().st_mode & 0o077 == 0  # the key file is the user's alone
    seed = base64.b64decode(json.loads(key_file.read_text())["seed_b64"])
    forbidden = [*spellings(seed), "pith-test-secret"]
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    texts = {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "stats": json.dumps(result.stats, default=str),
        **{stored.path: store.get_bytes(stored.path).decode("latin-1") for stored in store.list()},
    }
    assert len(texts) > 10
    assert [(where, secret) for where, text in texts.items() for secret in forbidden if secret in text] == []
