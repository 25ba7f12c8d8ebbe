"""A real S3-compatible server for the storage tests, and the two-backend ``store``.

moto runs in server mode as a subprocess on loopback and is spoken to over HTTP, as
MinIO or AWS would be (the in-process ``mock_aws`` is not used). Each test gets a
fresh bucket and dummy credentials, isolated from any AWS configuration on the host.
"""

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from storage.archive.folder_store import LocalStore
from storage.archive.s3_store import S3Store

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory):
    """Start ``python -m moto.server`` and yield its endpoint URL once it answers."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    with serving(process, "moto server", f"{url}/moto-api/", log):
        yield url


@contextmanager
def serving(process: subprocess.Popen, name: str, probe_url: str, log) -> Iterator[None]:
    """Once the server ``process`` answers ``probe_url`` (any HTTP status), until the
    block ends; then it is stopped and its ``log`` closed."""
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            pytest.fail(f"{name} exited with {process.returncode}; see {log.name}")
        try:
            _NO_PROXY.open(probe_url, timeout=1).close()
            break
        except urllib.error.HTTPError:  # an answer
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"{name} did not answer on {probe_url} within 30 s")
            time.sleep(0.1)
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def s3_env(monkeypatch, tmp_path):
    """Dummy credentials and region; no host AWS config, proxies or instance metadata."""
    for name in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "pith-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "pith-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def s3_client(s3_endpoint, s3_env):
    """A plain boto3 client on the test server, to look at objects behind the store."""
    import boto3

    return boto3.client("s3", endpoint_url=s3_endpoint)


@pytest.fixture
def s3_bucket(s3_client) -> str:
    name = f"pith-test-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def refused_port():
    """A bound but never listening loopback port: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def store(request, tmp_path):
    """The same archive on each backend: a folder, and a prefix in a fresh bucket."""
    if request.param == "local":
        return LocalStore(tmp_path / "archive")
    bucket = request.getfixturevalue("s3_bucket")
    return S3Store(bucket, "archive", endpoint_url=request.getfixturevalue("s3_endpoint"))


def arrow_filesystem(store):
    """``(filesystem, base)`` for pyarrow to read the archive where it is: the folder,
    or the bucket through pyarrow's own S3 client (no copy, no glue)."""
    if isinstance(store, LocalStore):
        return None, str(store.root)
    from urllib.parse import urlparse

    from pyarrow import fs

    endpoint = urlparse(store.endpoint_url)
    s3 = fs.S3FileSystem(
        access_key="pith-test",
        secret_key="pith-test-secret",
        region="us-east-1",
        endpoint_override=endpoint.netloc,
        scheme=endpoint.scheme,
    )
    return s3, f"{store.bucket}/{store.prefix}"


def local_copy(store, folder):
    """A folder DuckDB can read: the store's own root, or a download of its tables/
    (DuckDB's httpfs extension cannot be installed offline)."""
    if isinstance(store, LocalStore):
        return store.root
    for stored in store.list("tables/"):
        target = folder / stored.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(store.get_bytes(stored.path))
    return folder
