"""One error contract for every command: a keyring that is no keyring, a bucket that
does not exist and credentials a store refuses are each one line saying what to fix,
exit 2, whichever command met them; an empty --resolver is refused, where an empty
--notify (an unset variable in a unit's command line) means no notification."""

import json

import pytest

from storage.archive.signing_key import new_signer
from tests.plugins.cli import run_cli

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"  # a real registry record's suffix (pith/fixtures)


def error_line(result, code: int = 2) -> str:
    assert result.returncode == code, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("Error: ")
    return line


def every_command(folder, archive: str) -> dict[str, list]:
    """Each command that reads keys or an archive, as it would be given ``archive``."""
    return {
        "crawl": ["crawl", "--resolver", "http://127.0.0.1:9", "--out", folder / "out", REAL],
        "sync": ["sync", archive, "--keyring", folder / "peer-key.json", "--out", folder / "copy"],
        "verify": ["verify", archive],
        "audit": ["audit", archive],
        "export": ["export", archive, "--format", "bag", "--out", folder / "bag"],
        "serve": ["serve", archive],
        "checkpoint": ["checkpoint", archive],
        "prove": ["prove", archive, REAL],
    }


COMMANDS = ["crawl", "sync", "verify", "audit", "export", "serve", "checkpoint", "prove"]


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """This machine's archiver key and state kept in ``tmp_path``."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "peer-key.json").write_text(json.dumps(new_signer().pinned().document()))  # a peer's archive key
    return tmp_path


@pytest.mark.parametrize("command", COMMANDS)
def test_a_keyring_that_is_not_json_is_one_line_naming_it_and_what_a_keyring_is(isolated, command):
    (isolated / "keys.json").write_text("{'keys': []}\n")  # Python, not JSON
    args = every_command(isolated, str(isolated))[command]
    line = error_line(run_cli(*args, "--keyring", isolated / "keys.json"))
    assert f"--keyring {isolated / 'keys.json'}: not JSON (" in line
    assert 'give a keyring file {"keys": [...]}, one key document (keys/<key_id>.json) or a private key file' in line
    assert not (isolated / "out").exists() and not (isolated / "copy").exists()


@pytest.mark.slow
@pytest.mark.parametrize("refusal", ["no bucket", "wrong secret"])
@pytest.mark.parametrize("command", [*COMMANDS, "keyring"])
def test_a_missing_bucket_or_refused_credentials_is_one_line_and_exit_2_in_every_command(
    isolated, rclone_endpoint, rclone_bucket, monkeypatch, command, refusal
):
    """Against rclone's S3 server, which checks the credentials it is given."""
    bucket = "pith-no-such-bucket" if refusal == "no bucket" else rclone_bucket
    if refusal == "wrong secret":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    archive = f"s3://{bucket}/archive"
    commands = every_command(isolated, archive)
    commands["crawl"] = ["crawl", "--resolver", "http://127.0.0.1:9", "--out", archive, REAL]
    commands["keyring"] = ["audit", isolated, "--keyring", f"{archive}/keys/k.json"]
    line = error_line(run_cli(*commands[command], "--s3-endpoint-url", rclone_endpoint.url))
    said = "does not exist: create it first" if refusal == "no bucket" else "refuses these credentials"
    assert f"bucket {bucket} {said}" in line, line
    assert not (isolated / "copy").exists() and not (isolated / "bag").exists()


def test_an_empty_resolver_is_refused(isolated):
    line = error_line(run_cli("crawl", "--resolver", "", "--out", isolated / "out", REAL))
    assert "--resolver '' is not an http(s) URL" in line and not (isolated / "out").exists()
    synced = run_cli("crawl", "--from-archive", isolated, "--resolver", "", "--out", isolated / "copy")
    assert "--from-archive copies a peer instead of crawling" in error_line(synced)


def test_an_empty_notify_means_no_notification(isolated):
    """The run goes on to its own outcome (here: no archive at the folder, exit 4)."""
    line = error_line(run_cli("audit", isolated, "--notify", ""), code=4)
    assert "no archive at" in line and "--notify" not in line
    assert "--notify 'ftp://x' is not an http(s) URL" in error_line(run_cli("audit", isolated, "--notify", "ftp://x"))
