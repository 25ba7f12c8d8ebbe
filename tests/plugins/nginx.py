"""nginx serving folders as static files on loopback: a registry exported as plain
files, a peer archive, a bucket website, as users serve them.

``nginx`` (installed by ``.ci/run`` from the system's packages) is a factory:
``nginx(root)`` starts one server for the folder and returns its base URL
(``http://127.0.0.1:PORT``); ``nginx(root, access_log=path)`` also logs one line a
request (method, path, status), for tests that count what a run read. The folder may
be filled after the server starts: nginx reads the files as they are asked for.
Every server a test started is stopped when it ends.
"""

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pith_testkit import nginx as nginx_server


@pytest.fixture
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    started: list[subprocess.Popen] = []

    def serve(root: Path, access_log: Path | None = None) -> str:
        root.mkdir(parents=True, exist_ok=True)
        process, (url,) = nginx_server.start([root], tmp_path_factory.mktemp("nginx"), access_log=access_log)
        started.append(process)
        return url

    yield serve
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
