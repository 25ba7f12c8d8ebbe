"""Dataset releases (``export --format release``), read by the tools their users run:
mlcroissant, frictionless, Hugging Face ``datasets`` and DuckDB; incremental change
sets that rebuild the next full release; S3 to S3; bad ``--since``."""

import json
import os
import subprocess
import sys

import duckdb
import pytest

from pith.signing import Signer
from storage.archive.folder_store import LocalStore
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, extended, write_run
from tests.plugins.cli import run_cli
from tests.plugins.tables import read_rows

SIGNER = Signer.generate("release-test")
TABLES = ("records", "events", "aliases", "citations")


@pytest.fixture
def archive(tmp_path, corpus_dir, corpus_keyring):
    """An archive of the corpus in two runs; the archiver key is this machine's."""
    SIGNER.save(tmp_path / "config" / "pith-archiver" / "signing-key.json")
    store = LocalStore(tmp_path / "archive")
    raws = list(corpus_raws(corpus_dir).values())
    write_run(store, SIGNER, corpus_keyring, raws[:20])
    write_run(store, SIGNER, corpus_keyring, raws[20:])
    return store


def release(archive_path, out, corpus_dir, *extra):
    return run_cli(
        "export", archive_path, "--format", "release", "--out", out, "--keyring", corpus_dir / KEYRING_NAME, *extra
    )


def versions(folder) -> dict[str, str]:
    return {row["pith_number"]: row["bundle_sha256"] for row in read_rows(folder, "records", folder="data")}


def test_a_release_holds_each_records_current_version(tmp_path, archive, corpus_dir, corpus_catalog):
    made = release(archive.root, tmp_path / "rel", corpus_dir)
    assert made.returncode == 0, made.output
    records = read_rows(tmp_path / "rel", "records", folder="data")
    assert len(records) == len({r["pith_number"] for r in records}) == len(corpus_catalog.suffixes)
    dois = {
        row["pith_number"]: row["alias_value"]
        for row in read_rows(tmp_path / "rel", "aliases", folder="data")
        if row["alias_kind"] == "doi"
    }
    assert dois and {r["pith_number"]: r["doi"] for r in records if r["doi"]} == dois  # the DOI, as a column
    document = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert document["release_type"] == "pith_archiver_release" and len(document["runs"]) == 2
    assert document["signature"]["key_id"] == SIGNER.key_id
    assert {name: table["rows"] for name, table in document["tables"].items()}["records"] == len(records)
    for entry in document["files"]:  # every file listed with its size and hash
        data = (tmp_path / "rel" / entry["path"]).read_bytes()
        assert len(data) == entry["size"]
    for table in TABLES:
        count = duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'rel' / 'data' / table}/*.parquet'").fetchall()[0][0]
        assert count == document["tables"][table]["rows"] and count > 0


def reader(code: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(cwd / ".hf")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_the_users_tools_read_a_release(tmp_path, archive, corpus_dir, corpus_catalog):
    out = tmp_path / "rel"
    assert release(archive.root, out, corpus_dir).returncode == 0
    count = len(corpus_catalog.suffixes)
    iterate = "import mlcroissant as mlc; records = mlc.Dataset(jsonld='croissant.json').records(record_set='records')"
    croissant = reader(f"{iterate}; print(len(list(records)))", out)
    assert croissant.stdout.split()[-1] == str(count), croissant.stderr[-2000:]
    validated = subprocess.run(
        [sys.executable, "-m", "frictionless", "validate", "datapackage.json"], cwd=out, capture_output=True, text=True
    )
    assert validated.returncode == 0, validated.stdout[-3000:]
    loaded = reader(
        f"import datasets; d = datasets.load_dataset({str(out)!r}, 'records', split='train'); "
        "print(len(d), len(set(d['pith_number'])))",
        tmp_path,
    )
    assert loaded.stdout.split()[-2:] == [str(count), str(count)], loaded.stderr[-2000:]
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: citations" in card
    assert "data/records/records-00000.parquet" in card


@pytest.mark.slow
def test_the_cards_loading_lines_run_as_printed_inside_the_release(tmp_path, archive, corpus_dir, corpus_catalog):
    """What a reader copies from the card's "Load it" block works, line by line, in the
    folder the card stands in, with the duckdb, pyarrow and datasets installed here."""
    out = tmp_path / "rel"
    assert release(archive.root, out, corpus_dir).returncode == 0
    block = (out / "README.md").read_text().split("```python\n", 1)[1].split("```", 1)[0]
    lines = block.strip().splitlines()
    assert {line.split(";")[0].split()[-1] for line in lines} >= {"duckdb", "ds", "datasets"}
    for line in lines:
        ran = reader(line, out)
        assert ran.returncode == 0, f"{line}: {ran.stderr[-2000:]}"
    counted = reader(lines[-1].replace("datasets.load_dataset", "print(datasets.load_dataset") + ")", out)
    assert f"num_rows: {len(corpus_catalog.suffixes)}" in counted.stdout, counted.stderr[-2000:]


@pytest.mark.slow
def test_change_sets_applied_in_order_give_the_next_full_release(tmp_path, archive, corpus_dir, corpus_keyring):
    first = tmp_path / "r1"
    assert release(archive.root, first, corpus_dir).returncode == 0
    raws = list(corpus_raws(corpus_dir).values())
    write_run(archive, SIGNER, corpus_keyring, [extended(raw, "2026-07-01T00:00:00Z") for raw in raws[:5]])
    changes = tmp_path / "r2-changes"
    made = release(archive.root, changes, corpus_dir, "--since", str(first))
    assert made.returncode == 0, made.output
    second_full = tmp_path / "r2"
    assert release(archive.root, second_full, corpus_dir).returncode == 0

    changed = read_rows(changes, "changes", folder="data")
    assert len(changed) == 5 and {row["kind"] for row in changed} == {"changed"}
    assert len(read_rows(changes, "records", folder="data")) == 5  # only what changed
    applied = versions(first) | {row["pith_number"]: row["bundle_sha256"] for row in changed}
    assert applied == versions(second_full)
    assert (
        json.loads((changes / "release.json").read_text())["since"]
        == json.loads((first / "release.json").read_text())["release_id"]
    )

    third_changes = tmp_path / "r3-changes"  # a change set after a change set
    write_run(archive, SIGNER, corpus_keyring, [extended(raw, "2026-08-01T00:00:00Z") for raw in raws[5:7]])
    assert release(archive.root, third_changes, corpus_dir, "--since", str(changes / "release.json")).returncode == 0
    third_full = tmp_path / "r3"
    assert release(archive.root, third_full, corpus_dir).returncode == 0
    applied |= {row["pith_number"]: row["bundle_sha256"] for row in read_rows(third_changes, "changes", folder="data")}
    assert applied == versions(third_full)


def test_a_release_from_s3_to_s3(tmp_path, corpus_dir, corpus_keyring, s3_endpoint, s3_env, s3_bucket):
    from storage.archive.s3_store import S3Store

    SIGNER.save(tmp_path / "config" / "pith-archiver" / "signing-key.json")
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    write_run(store, SIGNER, corpus_keyring, list(corpus_raws(corpus_dir).values())[:10])
    made = run_cli(
        "export",
        f"s3://{s3_bucket}/archive",
        "--format",
        "release",
        "--out",
        f"s3://{s3_bucket}/release",
        "--keyring",
        corpus_dir / KEYRING_NAME,
        "--s3-endpoint-url",
        s3_endpoint,
    )
    assert made.returncode == 0, made.output
    out = S3Store(s3_bucket, "release", endpoint_url=s3_endpoint)
    document = json.loads(out.get_bytes("release.json"))
    assert document["tables"]["records"]["rows"] == 10
    assert {stored.path for stored in out.list()} == {"release.json", *(entry["path"] for entry in document["files"])}


def test_a_release_of_bundles_that_do_not_verify_under_the_pinned_keys_is_refused(tmp_path, archive):
    """The archive's key pinned (this machine's), not the corpus's registry key: every
    version's bundle is unknown_key, so the release is refused as a bag is, before
    anything is written."""
    out = tmp_path / "out"
    made = run_cli("export", archive.root, "--format", "release", "--out", out)
    assert made.returncode == 1, made.output
    [line] = made.stderr.strip().splitlines()
    assert line.startswith("Error: raw/bundles/") and "does not verify (unknown_key at " in line, line
    assert line.endswith(
        "nothing exported; pin the key that signed it (--keyring FILE) if you trust it, or audit the archive"
    )
    assert not out.exists()


@pytest.mark.parametrize("what", ["not a release", "another archive"])
def test_a_since_that_is_no_release_of_this_archive_is_one_line(tmp_path, archive, corpus_dir, corpus_keyring, what):
    if what == "not a release":
        since = tmp_path / "nothing"
        since.mkdir()
        (since / "release.json").write_text('{"hello": 1}')
    else:
        other = LocalStore(tmp_path / "other")
        write_run(other, SIGNER, corpus_keyring, list(corpus_raws(corpus_dir).values())[:3])
        since = tmp_path / "other-release"
        assert release(other.root, since, corpus_dir).returncode == 0
    made = release(archive.root, tmp_path / "out", corpus_dir, "--since", str(since))
    assert made.returncode == 2
    assert ("not a release" if what == "not a release" else "a release of another archive") in made.output, made.output
    assert len(made.output.strip().splitlines()) == 1 and "Traceback" not in made.output
    assert not (tmp_path / "out").exists()  # nothing written


def test_verify_checks_a_releases_signature_and_files(tmp_path, archive, corpus_dir):
    out = tmp_path / "rel"
    assert release(archive.root, out, corpus_dir).returncode == 0
    here = run_cli("verify", str(out / "release.json"))  # this machine's archiver key is trusted with no option
    assert here.returncode == 0 and "VERIFIED" in here.output, here.output
    (tmp_path / "config" / "pith-archiver" / "signing-key.json").unlink()  # another machine: the key must be pinned
    elsewhere = run_cli("verify", str(out / "release.json"))
    assert elsewhere.returncode == 1 and "unknown_key" in elsewhere.output, elsewhere.output
    key = ["--keyring", str(archive.root / "keys" / f"{SIGNER.key_id}.json")]  # the archiver key, as published
    ours = run_cli("verify", *key, str(out / "release.json"))
    assert ours.returncode == 0, ours.output
    assert "VERIFIED" in ours.output
    shard = next((out / "data" / "records").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes() + b"x")
    altered = run_cli("verify", *key, str(out / "release.json"))
    assert altered.returncode == 1 and "release_file_mismatch" in altered.output


def test_verify_names_an_altered_or_forged_release_json(tmp_path, archive, corpus_dir):
    out = tmp_path / "rel"
    assert release(archive.root, out, corpus_dir).returncode == 0
    key = ["--keyring", str(archive.root / "keys" / f"{SIGNER.key_id}.json")]
    original = json.loads((out / "release.json").read_text())
    for name, edit, reason in [
        ("counts", lambda d: d["tables"]["records"].update(rows=1), "release_hash_mismatch"),
        ("signature", lambda d: d["signature"].update(signature_b64="A" * 86 + "=="), "release_signature_invalid"),
    ]:
        document = json.loads(json.dumps(original))
        edit(document)
        (out / "release.json").write_text(json.dumps(document))
        result = run_cli("verify", *key, str(out / "release.json"))
        assert result.returncode == 1 and reason in result.output, (name, result.output)


def test_a_release_gaining_an_unlisted_file_is_rejected_and_its_cards_name_exact_files(tmp_path, archive, corpus_dir):
    out = tmp_path / "rel"
    assert release(archive.root, out, corpus_dir).returncode == 0
    listed = {entry["path"] for entry in json.loads((out / "release.json").read_text())["files"]}
    croissant = json.loads((out / "croissant.json").read_text())
    included = {path for item in croissant["distribution"] for path in item.get("includes", [])}
    assert included == {path for path in listed if path.startswith("data/")}  # every shard, and nothing else
    assert "*" not in (out / "README.md").read_text().split("---")[1]  # the configs name files, not globs
    resources = json.loads((out / "datapackage.json").read_text())["resources"]
    assert {resource["path"] for resource in resources} == included
    shard = next((out / "data" / "records").glob("*.parquet"))
    (shard.parent / "records-extra.parquet").write_bytes(shard.read_bytes())
    result = run_cli("verify", str(out / "release.json"))
    assert result.returncode == 1 and "release_unlisted_file" in result.output, result.output
    assert "data/records/records-extra.parquet" in result.output


def halve_index(folder):
    import pyarrow.parquet as pq

    index = pq.read_table(folder / "index" / "versions.parquet")
    pq.write_table(index.slice(0, index.num_rows // 2), folder / "index" / "versions.parquet")


def edit_release_json(folder):
    document = json.loads((folder / "release.json").read_text())
    document["runs"] = document["runs"][:1]
    (folder / "release.json").write_text(json.dumps(document))


def resign_with_an_unpinned_key(folder):
    from storage.publishing.release import sign_release

    document = json.loads((folder / "release.json").read_text())
    (folder / "release.json").write_text(json.dumps(sign_release(document, Signer.generate("stranger"))))


def add_a_shard(folder):
    shard = next((folder / "data" / "records").glob("*.parquet"))
    (shard.parent / "records-extra.parquet").write_bytes(shard.read_bytes())


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (halve_index, "release_file_mismatch"),
        (edit_release_json, "release_hash_mismatch"),
        (resign_with_an_unpinned_key, "unknown_key"),
        (add_a_shard, "release_unlisted_file"),
    ],
)
def test_a_since_release_that_does_not_verify_is_refused_and_nothing_written(
    tmp_path, archive, corpus_dir, tamper, reason
):
    previous = tmp_path / "r1"
    assert release(archive.root, previous, corpus_dir).returncode == 0
    tamper(previous)
    made = release(archive.root, tmp_path / "out", corpus_dir, "--since", str(previous / "release.json"))
    assert made.returncode == 2, made.output
    assert reason in made.output and len(made.output.strip().splitlines()) == 1 and "Traceback" not in made.output
    assert not (tmp_path / "out").exists()  # nothing written
