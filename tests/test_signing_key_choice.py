"""Which key signs an archive is never decided by accident: a ``--signing-key`` that
does not exist is refused (only the default key is made, on first use), a key new to
an archive that other keys sign starts signing it only with ``--add-signing-key``, and
the key documents an archive publishes pin as ``--keyring`` where they are served."""

import json

import pytest

from storage.archive import layout
from storage.archive.signing_key import new_signer
from tests.plugins.cli import run_cli

pytestmark = pytest.mark.slow


def error_line(result) -> str:
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("Error: ") and "Traceback" not in result.stderr
    return line


def default_key(home):
    return home / "config" / "pith-archiver" / "signing-key.json"


def test_a_signing_key_that_does_not_exist_is_refused_and_none_is_made(tmp_path):
    typo = tmp_path / "keys" / "signing-kye.json"
    line = error_line(run_cli("crawl", "--out", tmp_path / "archive", "--signing-key", typo, home=tmp_path))
    assert f"--signing-key {typo}: no such file" in line and "pith-archiver keys generate --signing-key" in line
    assert not typo.exists() and not typo.parent.exists() and not default_key(tmp_path).exists()
    assert not (tmp_path / "archive").exists()  # refused before the archive's folder was made
    peer_key = tmp_path / "peer-key.json"
    peer_key.write_text(json.dumps(new_signer().pinned().document()))
    sync = [tmp_path, "--keyring", peer_key, "--out", tmp_path / "copy", "--signing-key", typo]
    synced = run_cli("sync", *sync)
    assert "no such file" in error_line(synced) and not typo.exists() and not (tmp_path / "copy").exists()


def test_a_new_key_signs_an_archive_another_key_signs_only_when_asked(tmp_path):
    archive = tmp_path / "archive"
    first, second = tmp_path / "first", tmp_path / "second"
    for home in (first, second):
        home.mkdir()
    run_cli("crawl", "--out", archive, home=first, timeout=300).check()
    manifests = sorted((archive / layout.MANIFESTS).iterdir())
    [signer] = [path.stem for path in (archive / layout.KEYS).iterdir()]

    line = error_line(run_cli("crawl", "--out", archive, home=second, timeout=300))
    assert f"is signed by {signer}, not by this machine's key" in line and "--add-signing-key" in line
    assert not default_key(second).exists()  # refused before the key was made
    assert sorted((archive / layout.MANIFESTS).iterdir()) == manifests

    run_cli("crawl", "--out", archive, "--add-signing-key", home=second, timeout=300).check()
    assert default_key(second).exists() and len(list((archive / layout.KEYS).iterdir())) == 2
    run_cli("crawl", "--out", archive, home=second, timeout=300).check()  # its key signs it now: no flag needed


def test_a_key_document_served_over_http_pins_as_a_keyring(tmp_path, nginx):
    """audit from a machine that holds none of the archive's keys, pinning its key
    document where the archive is served (as audit's own fix for an unpinned key says)."""
    crawler, auditor = tmp_path / "crawler", tmp_path / "auditor"
    auditor.mkdir()
    crawler.mkdir()
    run_cli("crawl", "--out", tmp_path / "site" / "archive", home=crawler, timeout=300).check()
    url = nginx(tmp_path / "site")
    [document] = (tmp_path / "site" / "archive" / layout.KEYS).iterdir()
    assert json.loads(document.read_text())["role"] == "archive"
    pinned = f"{url}/archive/{layout.KEYS}/{document.name}"
    audited = run_cli("audit", tmp_path / "site" / "archive", "--keyring", pinned, home=auditor)
    assert audited.returncode == 0 and audited.stdout.splitlines()[-1].startswith("clean: "), audited.output
    missing = run_cli(
        "audit", tmp_path / "site" / "archive", "--keyring", f"{url}/archive/keys/none.json", home=auditor
    )
    assert "--keyring " in error_line(missing) and "HTTP 404" in missing.stderr
