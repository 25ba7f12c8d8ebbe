"""A real Redis server on loopback for the shared-frontier tests.

``redis-server`` (installed by ``.ci/run`` from the system's packages) runs as a
subprocess on a free port with no persistence (``--save "" --appendonly no``) for the
whole session and is killed at the end. Each test gets its own database of it, flushed
afterwards, as ``redis_url`` (``redis://127.0.0.1:PORT/N``).
"""

import itertools
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.plugins.s3 import _free_port

DATABASES = 64


class RedisUnavailable(RuntimeError):
    """redis-server is missing, or did not start."""


def start_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    """Start a redis-server on a free loopback port, with no persistence and its log in
    ``folder``; return it and its URL once it answers. Also used by bench/bench_scale.py."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisUnavailable("redis-server is not installed (bash .ci/run installs it: apt-get install redis-server)")
    port = _free_port()
    with (folder / "redis.log").open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--databases",
                str(DATABASES),
                "--dir",
                str(folder),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    client = redis.Redis(port=port, socket_timeout=1)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            client.close()
            return process, f"redis://127.0.0.1:{port}"
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RedisUnavailable(f"redis-server did not answer on port {port}; see {folder / 'redis.log'}")
            time.sleep(0.05)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """``redis://127.0.0.1:PORT`` of a running redis-server."""
    try:
        process, url = start_redis(tmp_path_factory.mktemp("redis"))
    except RedisUnavailable as exc:
        pytest.fail(str(exc))
    yield url
    process.kill()
    process.wait()


_databases = itertools.count(1)


@pytest.fixture
def redis_url(redis_server):
    """A database of the session's server for this test alone, flushed afterwards."""
    url = f"{redis_server}/{next(_databases) % DATABASES}"
    yield url
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
