"""``prove ARCHIVE RECORD`` takes a record by any name a crawl takes as a seed (a full
or short Pith number, a suffix, an arXiv id, a DOI, a record URL), looked up in the
archive's own tables, and agrees with the mirror's resolver on what each name means;
docs/TRANSPARENCY.md's proof lines run as written beside an archive the demo crawled."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pith.keyring import Keyring
from pith.numbers import SHORT_LENGTHS, suffix_of
from storage.archive.folder_store import LocalStore
from storage.archive.reader import CommittedArchive
from storage.archive.record_names import records_named
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.crawling import run_cli_crawl

DOCS = Path(__file__).resolve().parents[1] / "docs"
BIN = Path(sys.executable).parent  # pith-archiver and a python3 with PyNaCl
REAL = "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B"  # a real registry record the demo crawls: arXiv 1904.12043


@pytest.fixture
def archive(tmp_path, corpus_dir, corpus_keyring, test_signer) -> CommittedArchive:
    store = LocalStore(tmp_path / "archive")
    write_run(store, test_signer, corpus_keyring, list(corpus_raws(corpus_dir).values()))
    return CommittedArchive.read(store, Keyring([*corpus_keyring, test_signer.pinned()]))


def test_every_name_means_what_the_mirror_resolves_it_to(archive, corpus_dir, corpus_catalog):
    """Short numbers of each length, arXiv ids with and without version, DOIs in any case:
    the archive's tables give the record the mirror's catalog gives (for an arXiv id
    several versions share, the newest)."""
    shared = 0
    for suffix in corpus_catalog.suffixes:
        bundle = json.loads((corpus_dir / "bundles" / f"{suffix}.bundle.json").read_bytes())
        names = [suffix[:n] for n in SHORT_LENGTHS]
        names += [alias["alias_value"] for alias in bundle["source_aliases"] if alias["alias_kind"] in ("arxiv", "doi")]
        names += [name.upper() for name in names if name.startswith("10.")]
        for name in names:
            expected = corpus_catalog.entry(corpus_catalog.resolve(name)).pith_number
            assert records_named(archive, name) == [expected], name
            shared += suffix_of(expected) != suffix
    assert shared > 0  # the corpus holds papers in several versions: their arXiv id names the newest
    assert records_named(archive, "9999.99999") == records_named(archive, "AAAAAAAA") == []


def test_prove_by_each_seed_form_and_the_refusals(tmp_path, archive, corpus_catalog, test_signer):
    suffix = corpus_catalog.suffixes[3]
    number = corpus_catalog.entry(suffix).pith_number
    root = str(archive.store.root)
    for name in (number, suffix, f"pith:{suffix[:8]}", suffix[:12], f"http://127.0.0.1:1/pith/{suffix}/bundle.json"):
        proved = run_cli("prove", "--trust-archive-keys", root, name, "--json")
        assert proved.returncode == 0, (name, proved.output)
        assert json.loads(proved.stdout)["pith_number"] == number
    missing = run_cli("prove", "--trust-archive-keys", root, "pith:AAAAAAAA")
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        == f"Error: {archive.store.uri} holds no record named pith:AAAAAAAA (in its records and aliases tables)"
    )
    for name, message in (("sitemap", "'sitemap' names no record"), ("not one", "is not a Pith number")):
        refused = run_cli("prove", "--trust-archive-keys", root, name)
        assert refused.returncode == 2 and message in refused.stderr, refused.output
    both = run_cli("prove", "--trust-archive-keys", root, number, "--json", "--format", "tlog-proof")
    assert both.returncode == 2 and "--json is --format json" in both.output


def documented(marker: str) -> str:
    """The ```sh block of docs/TRANSPARENCY.md that names ``marker``."""
    blocks = re.findall(r"```sh\n(.*?)```", (DOCS / "TRANSPARENCY.md").read_text("utf-8"), re.S)
    [block] = [block for block in blocks if marker in block]
    return block


@pytest.mark.slow
def test_the_documented_proof_lines_run_as_written(tmp_path, monkeypatch):
    """The demo crawls the shipped registry bundles into ./archive; the docs' lines,
    run there by bash, prove a record by its short number and check the proof with
    check_proof.py; prove takes the same record by its arXiv id and its DOI."""
    run_cli_crawl(tmp_path, logged=False).check()
    (tmp_path / "docs").symlink_to(DOCS)
    lines = documented("check_proof.py")
    assert "pith:RLLQL635" in lines and "keys/*.json" in lines
    env = {**os.environ, **isolated_home(tmp_path), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", lines], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(f"{REAL}: stored as ") and " in the log of pith-archiver-" in ran.stdout
    assert json.loads((tmp_path / "proof.json").read_text())["pith_number"] == REAL
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # this machine's key: no option needed
    for name in ("1904.12043", "arXiv:1904.12043v2", "https://doi.org/10.48550/ARXIV.1904.12043"):
        proved = run_cli("prove", tmp_path / "archive", name, "--json")
        assert proved.returncode == 0 and json.loads(proved.stdout)["pith_number"] == REAL, (name, proved.output)
