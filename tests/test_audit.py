"""The audit: clean on what a crawl or a writer committed, and each kind of damage
named, on both backends: a flipped byte, a missing object, a manifest whose signature
fails, a broken attestation chain, a wrong row count, an orphan."""

import hashlib
import json
from collections import Counter

import pytest

from pith.canonical import canon
from pith.keyring import Keyring
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import sign_manifest
from storage.archive.s3_store import S3Store
from storage.audit import Audit, parquet_rows
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl


@pytest.fixture
def overwrite(store, request):
    """Replace an object in place, behind the create-only store: what damage does."""
    if isinstance(store, LocalStore):
        return lambda path, data: (store.root / path).write_bytes(data)
    client = request.getfixturevalue("s3_client")
    return lambda path, data: client.put_object(Bucket=store.bucket, Key=f"{store.prefix}/{path}", Body=data)


@pytest.fixture
def archived(store, corpus_dir, corpus_keyring, test_signer):
    """Two committed runs of five corpus records; returns their manifests."""
    raws = list(corpus_raws(corpus_dir).values())[:5]
    return [
        json.loads(store.get_bytes(write_run(store, test_signer, corpus_keyring, part)))
        for part in (raws[:3], raws[3:])
    ]


def audit(store, corpus_keyring, test_signer) -> tuple[list[tuple[str, str, str]], Audit]:
    run = Audit(store, corpus_keyring, Keyring([test_signer.pinned()]))
    return [(d.code, d.path, d.detail) for d in run.run()], run


def resign(store, overwrite, manifest: dict, signer) -> None:
    """Write ``manifest`` back, signed again by the archive's own key (an insider's edit)."""
    body = {k: v for k, v in manifest.items() if k != "signature"}
    overwrite(layout.manifest(manifest["run_id"]), canon(sign_manifest(body, signer)) + b"\n")


def entry_of(manifest: dict, prefix: str) -> dict:
    return next(e for e in manifest["objects"] if e["path"].startswith(prefix))


def test_a_committed_archive_audits_clean(store, archived, corpus_keyring, test_signer):
    found, run = audit(store, corpus_keyring, test_signer)
    assert found == []
    counts = run.counts
    assert (counts.manifests, counts.bundles, counts.attestations) == (2, 5, 5)
    assert counts.objects == len({e["path"] for m in archived for e in m["objects"]})
    assert counts.clean


def test_a_flipped_byte_in_a_raw_bundle(store, archived, overwrite, corpus_keyring, test_signer):
    raw = entry_of(archived[0], "raw/")["path"]
    data = bytearray(store.get_bytes(raw))
    data[data.index(b'"primary_cat":"') + 15] ^= 0x01
    overwrite(raw, bytes(data))
    found, _ = audit(store, corpus_keyring, test_signer)
    assert [(code, path) for code, path, _ in found] == [("hash_mismatch", raw), ("bundle_rejected", raw)]
    assert found[1][2].startswith("canonical_hash_mismatch at canonical_sha256")


def test_a_missing_object(store, archived, corpus_keyring, test_signer):
    table = entry_of(archived[1], "tables/records/")["path"]
    store.delete(table)
    found, _ = audit(store, corpus_keyring, test_signer)
    assert found == [("missing", table, "")]


def test_a_manifest_with_a_bad_signature(store, archived, overwrite, corpus_keyring, test_signer):
    manifest = archived[1]
    signature = manifest["signature"]["signature_b64"]
    manifest["signature"]["signature_b64"] = ("A" if signature[0] != "A" else "B") + signature[1:]
    overwrite(layout.manifest(manifest["run_id"]), canon(manifest) + b"\n")
    found, run = audit(store, corpus_keyring, test_signer)
    assert found[0] == ("manifest_invalid", layout.manifest(manifest["run_id"]), "manifest_signature_invalid")
    # what only that run listed is now unaccounted for; the key document the first run lists is not
    assert {(code, path) for code, path, _ in found[1:]} == {
        ("orphan", e["path"]) for e in manifest["objects"] if not e["path"].startswith("keys/")
    }
    assert run.counts.manifests == 1


def test_a_broken_chain(store, archived, overwrite, corpus_keyring, test_signer):
    """An insider drops an attestation and signs the manifest again: the chain tells."""
    manifest = archived[1]
    feed = entry_of(manifest, "attestations/")
    dropped, *rest = store.get_bytes(feed["path"]).splitlines(keepends=True)
    kept = b"".join(rest)
    overwrite(feed["path"], kept)
    feed.update(sha256=hashlib.sha256(kept).hexdigest(), size=len(kept))
    resign(store, overwrite, manifest, test_signer)
    found, _ = audit(store, corpus_keyring, test_signer)
    assert found == [
        ("attestation_invalid", layout.manifest(manifest["run_id"]), "the run archived 2 versions and attested 1"),
        (
            "chain_broken",
            feed["path"],
            f"lines[0].prev_event: names {json.loads(dropped)['event_id']}, which ends no feed of test-key-1",
        ),
    ]


def test_a_table_with_a_wrong_row_count(store, archived, overwrite, corpus_keyring, test_signer):
    manifest = archived[0]
    table = entry_of(manifest, "tables/events/")
    table["rows"] += 1
    resign(store, overwrite, manifest, test_signer)
    found, _ = audit(store, corpus_keyring, test_signer)
    assert found == [
        ("rows_mismatch", table["path"], f"{table['rows'] - 1} rows, listed as {table['rows']}"),
        ("rows_mismatch", layout.manifest(manifest["run_id"]), "events: the stats say 6, its files hold 7"),
    ]


def test_an_orphan(store, archived, corpus_keyring, test_signer):
    stray = layout.raw_bundle("ab" * 32)
    store.put_bytes(stray, b"{}")
    found, _ = audit(store, corpus_keyring, test_signer)
    assert found == [("orphan", stray, "2 bytes")]


def test_row_counts_come_from_the_footer_alone(store, archived):
    entry = entry_of(archived[0], "tables/aliases/")
    data = store.get_bytes(entry["path"])
    assert parquet_rows(data[-4096:]) == entry["rows"]
    with pytest.raises(ValueError, match="no Parquet footer"):
        parquet_rows(data[:-1])


# --- the command -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_after_a_crawl(tmp_path, corpus_dir, corpus_catalog, mirror, monkeypatch):
    archive = tmp_path / "archive"
    crawl = run_cli_crawl(
        tmp_path,
        "--resolver",
        mirror().url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        "--out",
        str(archive),
        "--max-records",
        "6",
        corpus_catalog.suffixes[0],
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    [key_document] = (archive / "keys").glob("*.json")
    keys = ["--keyring", str(corpus_dir / KEYRING_NAME), "--no-default-keys"]

    clean = run_cli("audit", str(archive), *keys, "--keyring", str(key_document))
    assert clean.returncode == 0, clean.output
    assert clean.output.startswith("clean: 1 manifest, ") and ", 6 bundles, 6 attestations" in clean.output

    # trust never comes from the archive unless asked for; elsewhere than the crawling machine, the
    # manifest is one finding that says how to pin its key, and its objects are not orphans
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "elsewhere"))
    untrusted = run_cli("audit", str(archive), *keys)
    assert untrusted.returncode == 1
    finding, summary = untrusted.stdout.splitlines()
    assert finding.startswith("manifest_unpinned manifests/")
    assert (
        f"to check them, pass --keyring {archive}/keys/{key_document.name} after checking its fingerprint, "
        "or --trust-archive-keys"
    ) in finding
    assert summary.startswith("1 discrepancy (manifest_unpinned 1) in 0 manifests")
    assert run_cli("audit", str(archive), *keys, "--trust-archive-keys").returncode == 0
    # on the crawling machine its own key is trusted with no option
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert run_cli("audit", str(archive), *keys).returncode == 0

    raw = next((archive / "raw" / "bundles").glob("*/*.json"))
    raw.write_bytes(raw.read_bytes().replace(b'"pith_number":"pith:', b'"pith_number":"pith:X', 1))
    damaged = run_cli("audit", str(archive), *keys, "--keyring", str(key_document), "--json")
    assert damaged.returncode == 1
    lines = [json.loads(line) for line in damaged.stdout.splitlines()]
    path = raw.relative_to(archive).as_posix()
    assert [(line["code"], line["path"]) for line in lines[:-1]] == [("size_mismatch", path), ("bundle_rejected", path)]
    assert lines[-1]["summary"]["discrepancies"] == {"bundle_rejected": 1, "size_mismatch": 1}
    assert lines[-1]["summary"]["clean"] is False


def test_the_command_on_s3_and_its_usage_errors(
    s3_endpoint, s3_bucket, corpus_dir, corpus_keyring, test_signer, tmp_path
):
    write_run(
        S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint),
        test_signer,
        corpus_keyring,
        list(corpus_raws(corpus_dir).values())[:2],
    )
    key_document = tmp_path / "archive-key.json"
    key_document.write_text(json.dumps(test_signer.public_document()))
    result = run_cli(
        "audit",
        f"s3://{s3_bucket}/archive",
        "--s3-endpoint-url",
        s3_endpoint,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--keyring",
        str(key_document),
    )
    assert result.returncode == 0, result.output
    assert "2 bundles, 2 attestations" in result.output
    assert run_cli("audit", str(tmp_path / "nowhere")).returncode == 2
    assert run_cli("audit", str(tmp_path), "--no-default-keys").returncode == 2


def test_findings_alike_are_told_once_with_their_fix(tmp_path, corpus_dir, corpus_keyring, test_signer):
    """The registry key not pinned: every bundle is unknown_key. The first is shown where
    it is found, then one line gives the count and the fix; -v and --json keep a line
    each, and the exit status is the same."""
    store = LocalStore(tmp_path / "archive")
    raws = [raw for raw in corpus_raws(corpus_dir).values() if b"pith-test-corpus-" in raw][:12]
    write_run(store, test_signer, corpus_keyring, raws)
    key = tmp_path / "archive-key.json"
    key.write_text(json.dumps(test_signer.public_document()))
    args = ["audit", store.root, "--no-default-keys", "--keyring", key]
    grouped = run_cli(*args)
    assert grouped.returncode == 1
    first, told, summary = grouped.stdout.splitlines()
    assert first.startswith("bundle_rejected raw/bundles/") and " unknown_key at " in first
    fix = "pin it with --keyring FILE (a keyring holding that key, its fingerprint checked out of band)"
    assert told == f"12 bundles signed by a key not pinned ({first.split(' ', 2)[2]}): {fix}; -v lists each"
    assert summary.startswith("12 discrepancies (bundle_rejected 12) in 1 manifest")
    each = run_cli(*args, "-v")
    assert each.returncode == 1 and each.stdout.count("bundle_rejected raw/bundles/") == 12
    assert told.removesuffix("; -v lists each") in each.stdout.splitlines()
    as_json = [json.loads(line) for line in run_cli(*args, "--json").stdout.splitlines()]
    assert [line.get("reason") for line in as_json[:-1]] == ["unknown_key"] * 12 and "summary" in as_json[-1]


# --- nothing is not clean --------------------------------------------------------------

READERS = {  # a command that reads an archive, and what it is asked to do
    "audit": [],
    "checkpoint": [],
    "serve": [],
    "export": ["--format", "parquet", "--out", "{out}"],
}


def read_nothing(command: str, where: str, out, *options: str):
    """``command`` run on ``where`` (writing to ``out``, for export), its one error line."""
    args = [arg.replace("{out}", str(out)) for arg in READERS[command]]
    result = run_cli(command, where, *args, *options)
    assert result.returncode == 4, (command, result.output)
    assert "Traceback" not in result.output
    [line] = result.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_folder_holding_no_archive_fails_never_clean(tmp_path, command, corpus_dir, corpus_keyring, test_signer):
    """An unmounted volume is an empty folder: a cron audit of it must not report success."""
    empty = tmp_path / "empty"
    empty.mkdir()
    why = (  # serve takes a folder of bundles too
        f"no manifests/ folder, and nothing to serve: no <SUFFIX>.bundle.json file in {empty}"
        if command == "serve"
        else "it is empty (an unmounted volume? a mistyped prefix?)"
    )
    assert read_nothing(command, str(empty), tmp_path / "out") == f"Error: no archive at {empty}: {why}"
    assert not (tmp_path / "out").exists()
    crashed = LocalStore(tmp_path / "crashed")  # a first run that never committed: orphans, no manifest
    write_run(crashed, test_signer, corpus_keyring, list(corpus_raws(corpus_dir).values())[:2], commit=False)
    (crashed.root / layout.MANIFESTS).mkdir(exist_ok=True)
    line = read_nothing(command, str(crashed.root), tmp_path / "out")
    assert (
        line == f"Error: no archive at {crashed.root}: nothing under {layout.MANIFESTS}/ (no run ever committed there)"
    )


@pytest.mark.parametrize("command", sorted(READERS))
def test_an_empty_s3_prefix_holds_no_archive(tmp_path, command, s3_endpoint, s3_bucket):
    where = f"s3://{s3_bucket}/archive"
    line = read_nothing(command, where, tmp_path / "out", "--s3-endpoint-url", s3_endpoint)
    assert line == f"Error: no archive at {where}: it is empty (an unmounted volume? a mistyped prefix?)"


def test_the_audit_reads_each_manifest_once(
    fault_proxy, s3_bucket, s3_endpoint, corpus_dir, corpus_keyring, test_signer, tmp_path
):
    """The log checks, --checkpoint's included, use the manifests the audit verified:
    one GET of each manifest in the whole command."""
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    raws = list(corpus_raws(corpus_dir).values())[:4]
    for part in (raws[:2], raws[2:]):
        write_run(store, test_signer, corpus_keyring, part)
    saved = tmp_path / "checkpoint.txt"
    saved.write_bytes(store.get_bytes(layout.checkpoint_at(test_signer.key_id, 2)))
    key_document = tmp_path / "archive-key.json"
    key_document.write_text(json.dumps(test_signer.public_document()))
    proxy = fault_proxy()
    result = run_cli(
        "audit",
        f"s3://{s3_bucket}/archive",
        "--s3-endpoint-url",
        proxy.url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--keyring",
        str(key_document),
        "--checkpoint",
        str(saved),
    )
    assert result.returncode == 0, result.output
    reads = Counter(r.path.partition("?")[0] for r in proxy.log if r.method == "GET" and "/manifests/" in r.path)
    assert sorted(reads.values()) == [1, 1], reads
