"""Offline exports: a BagIt bag of exactly the committed contents that bagit's own
validator accepts (and rejects once altered), from a folder and from S3, and a plain
Parquet dataset in a folder or an S3 prefix."""

import json

import bagit
import pytest

from pith.signing import Signer
from storage.archive import layout
from storage.archive.export_check import BundleRejected, check_included, included_bundles
from storage.archive.folder_store import LocalStore
from storage.archive.reader import CommittedArchive, ObjectAltered, reading_keyring
from storage.archive.s3_store import S3Store
from storage.archive.tables import TABLES
from storage.publishing.export import ExportError, export_bag, export_dataset
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, tampered, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

SIGNER = Signer.from_seed("archiver-1", bytes(32))
EXPORTED = (
    f"{layout.TABLES}/",
    f"{layout.RAW}/",
    f"{layout.ATTESTATIONS}/",
    f"{layout.LOGS}/",
    f"{layout.CHECKPOINTS}/",
    f"{layout.KEYS}/",
)


def fill(store, corpus_dir, corpus_keyring) -> list[str]:
    """Two committed runs (one with a rejected bundle), then a crashed one; the
    committed runs' manifest paths."""
    raws = list(corpus_raws(corpus_dir).values())
    manifests = [
        write_run(store, SIGNER, corpus_keyring, raws[:6], rejected=[tampered(raws[6])]),
        write_run(store, SIGNER, corpus_keyring, raws[7:10]),
    ]
    write_run(store, SIGNER, corpus_keyring, raws[10:12], commit=False)
    return manifests


def trusted(archive, corpus_keyring):
    """The corpus's registry keys and the archiver key the archive publishes."""
    return reading_keyring(archive, corpus_keyring, archive_keys=True)


def payload(bag_dir) -> dict[str, bytes]:
    root = bag_dir / "data"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_bag_holds_the_committed_contents_and_validates(tmp_path, corpus_dir, corpus_keyring):
    archive = LocalStore(tmp_path / "source")
    manifests = fill(archive, corpus_dir, corpus_keyring)
    summary = export_bag(archive, trusted(archive, corpus_keyring), tmp_path / "bag", organization="Example Library")
    bag = bagit.Bag(str(tmp_path / "bag"))
    bag.validate()
    assert sorted(bag.algorithms) == ["sha256", "sha512"]

    listed = CommittedArchive.read(archive, trusted(archive, corpus_keyring)).objects
    wanted = {path for path in listed if path.startswith(EXPORTED)}
    files = payload(tmp_path / "bag")
    assert set(files) == wanted | set(manifests) | {"README.md"}
    assert all(files[path] == archive.get_bytes(path) for path in wanted | set(manifests))
    orphans = {s.path for s in archive.list(f"{layout.RAW}/")} - set(listed)
    assert len(orphans) == 2 and not orphans & set(files)  # the crashed run's bundles stay behind
    assert not any(path.startswith(layout.QUARANTINE) for path in files)
    assert summary.objects == len(files) and summary.bundle_versions == 9
    assert summary.bytes == int(bag.info["Payload-Oxum"].split(".")[0])

    assert bag.info["Source-Organization"] == "Example Library"
    assert "9 bundle versions from 2 committed runs" in bag.info["External-Description"]
    assert {"Bagging-Date", "Bag-Software-Agent", "Payload-Oxum"} <= set(bag.info)
    readme = files["README.md"].decode()
    assert "| `tables/records/` | the `records` table (9 rows) |" in readme
    assert all(f"### `{name}`" in readme for name in TABLES)
    assert all(f"| `{field.name}` |" in readme for field in TABLES["events"].columns)
    assert all(path.split("/")[1][:-5] in readme for path in manifests)  # every run in the provenance
    assert SIGNER.fingerprint in readme


def test_an_altered_bag_does_not_validate(tmp_path, corpus_dir, corpus_keyring):
    archive = LocalStore(tmp_path / "source")
    fill(archive, corpus_dir, corpus_keyring)
    export_bag(archive, trusted(archive, corpus_keyring), tmp_path / "bag")
    bagit.Bag(str(tmp_path / "bag")).validate()
    victim = next((tmp_path / "bag" / "data" / layout.RAW).rglob("*.json"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit: same size, so only the checksums can tell
    victim.write_bytes(bytes(data))
    with pytest.raises(bagit.BagValidationError) as caught:
        bagit.Bag(str(tmp_path / "bag")).validate()
    assert any(getattr(d, "path", "").endswith(victim.name) for d in caught.value.details)


def test_a_bag_of_an_s3_archive_through_the_command_line(tmp_path, corpus_dir, corpus_keyring, s3_bucket, s3_endpoint):
    archive = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    fill(archive, corpus_dir, corpus_keyring)
    SIGNER.save(tmp_path / "archiver-1.key")
    result = run_cli(
        "export",
        f"s3://{s3_bucket}/archive",
        "--format",
        "bag",
        "--out",
        str(tmp_path / "bag"),
        "--s3-endpoint-url",
        s3_endpoint,
        "--source-organization",
        "Example",
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--signing-key",
        str(tmp_path / "archiver-1.key"),
    )
    assert result.returncode == 0, result.output
    assert "exported 9 bundle versions" in result.output
    bagit.Bag(str(tmp_path / "bag")).validate()
    files = payload(tmp_path / "bag")
    raw = {path for path in files if path.startswith(layout.RAW)}
    assert len(raw) == 9 and all(files[path] == archive.get_bytes(path) for path in raw)


def test_a_parquet_dataset_in_a_folder_or_an_s3_prefix(tmp_path, corpus_dir, corpus_keyring, store):
    archive = LocalStore(tmp_path / "source")
    fill(archive, corpus_dir, corpus_keyring)
    keyring = trusted(archive, corpus_keyring)
    listed = CommittedArchive.read(archive, keyring).objects
    tables = {path for path in listed if path.startswith(f"{layout.TABLES}/")}
    raw = {path for path in listed if path.startswith(f"{layout.RAW}/")}
    summary = export_dataset(archive, keyring, store, with_raw=True)
    assert {s.path for s in store.list()} == tables | raw | {"README.md"}
    assert summary.bundle_versions == len(raw) == 9
    assert all(store.get_bytes(path) == archive.get_bytes(path) for path in tables | raw)
    assert len(read_rows(store, "records")) == 9

    export_dataset(archive, keyring, store, with_raw=True)  # an interrupted export is simply run again
    assert {s.path for s in store.list()} == tables | raw | {"README.md"}
    write_run(archive, SIGNER, corpus_keyring, list(corpus_raws(corpus_dir).values())[12:13])
    with pytest.raises(ExportError, match="holds another export"):
        export_dataset(archive, trusted(archive, corpus_keyring), store, with_raw=True)


def test_a_plain_dataset_is_tables_and_readme_unless_raw_is_asked_for(tmp_path, corpus_dir, corpus_keyring):
    archive = LocalStore(tmp_path / "source")
    fill(archive, corpus_dir, corpus_keyring)
    result = run_cli(
        "export",
        str(archive.root),
        "--format",
        "parquet",
        "--out",
        str(tmp_path / "d"),
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--trust-archive-keys",
    )
    assert result.returncode == 0, result.output
    exported = {s.path for s in LocalStore(tmp_path / "d").list()}
    assert exported == {
        p
        for p in CommittedArchive.read(archive, trusted(archive, corpus_keyring)).objects
        if p.startswith(f"{layout.TABLES}/")
    } | {"README.md"}
    readme = (tmp_path / "d" / "README.md").read_text()
    assert "manifests/`" not in readme.split("## Provenance")[0] and "| `tables/records/` |" in readme


@pytest.mark.parametrize(
    "old, new",
    [(["--bag"], ["--format", "bag", "--out"]), (["--to"], ["--out"]), (["--format", "parquet", "--to"], ["--out"])],
)
def test_the_old_names_of_out_still_export_with_a_notice(tmp_path, corpus_dir, corpus_keyring, old, new):
    """``--bag OUT`` (now ``--out OUT --format bag``) and ``--to DEST`` (now ``--out``): the
    same export as the new names make, after one line naming them."""
    archive = LocalStore(tmp_path / "source")
    fill(archive, corpus_dir, corpus_keyring)
    trust = ["--keyring", corpus_dir / KEYRING_NAME, "--trust-archive-keys"]
    before = run_cli("export", archive.root, *old, tmp_path / "old", *trust).check()
    after = run_cli("export", archive.root, *new, tmp_path / "new", *trust).check()
    now = "--out --format bag" if old == ["--bag"] else "--out"
    assert before.stderr.splitlines() == [f"notice: {old[-1]} is now {now}; the old name goes in the next release"]
    assert before.stdout.replace(str(tmp_path / "old"), "DEST") == after.stdout.replace(str(tmp_path / "new"), "DEST")
    assert after.stderr == ""


@pytest.mark.parametrize("prefix", [layout.RAW, layout.TABLES])
def test_an_object_that_no_longer_matches_its_manifest_stops_the_export(tmp_path, corpus_dir, corpus_keyring, prefix):
    """A raw bundle is read (and found altered) before anything is written; a table
    file while the bag is staged, whose folder goes with it."""
    archive = LocalStore(tmp_path / "source")
    fill(archive, corpus_dir, corpus_keyring)
    keyring = trusted(archive, corpus_keyring)
    victim = next(path for path in CommittedArchive.read(archive, keyring).objects if path.startswith(prefix))
    data = bytearray(archive.get_bytes(victim))
    data[len(data) // 2] ^= 0x01
    (archive.root / victim).write_bytes(bytes(data))
    out = tmp_path / "exports" / "bag"
    with pytest.raises(ObjectAltered, match=victim):
        export_bag(archive, keyring, out)
    assert list(tmp_path.glob("exports/*")) == []  # no bag, no half-made staging folder


def test_the_export_check_takes_the_versions_an_export_includes(tmp_path, corpus_dir, corpus_keyring):
    """A release or a WACZ names versions: their raw bundles are checked, and a version
    with none committed stops the export as a bundle that does not verify would."""
    archive = LocalStore(tmp_path / "source")
    first = json.loads(archive.get_bytes(fill(archive, corpus_dir, corpus_keyring)[0]))
    committed = CommittedArchive.read(archive, trusted(archive, corpus_keyring))
    row = read_rows(archive, "records", manifest=first)[0]
    assert [entry.path for entry in included_bundles(committed, {row["bundle_sha256"]})] == [row["raw_path"]]
    assert check_included(committed) == len(committed.under(f"{layout.RAW}/")) == 9
    with pytest.raises(BundleRejected, match=f"^bundle version {'0' * 64}: not committed: nothing exported"):
        check_included(committed, [row["bundle_sha256"], "0" * 64])


@pytest.mark.slow
def test_every_format_refuses_alike_what_does_not_verify_under_the_pinned_keys(tmp_path, static_site):
    """The archive's key pinned, not the registry's (``--no-default-keys``): every
    bundle a crawl archived is unknown_key. A bag, a Parquet dataset, a release and a
    WACZ are all refused by the one check, with the same line and exit 1, and nothing
    is written; with the registry key pinned, the same WACZ is made."""
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive).check()
    out = tmp_path / "out"
    out.mkdir()
    targets = {
        "bag": ["--format", "bag", "--out", out / "bag"],
        "parquet": ["--format", "parquet", "--out", out / "parquet"],
        "release": ["--format", "release", "--out", out / "release"],
        "wacz": ["--format", "wacz", "--out", out / "x.wacz"],
    }
    refusals = set()
    for fmt, args in targets.items():
        refused = run_cli("export", archive, *args, "--no-default-keys")
        assert refused.returncode == 1, (fmt, refused.output)
        [line] = refused.stderr.strip().splitlines()
        refusals.add(line)
    assert list(out.iterdir()) == []  # nothing, not even an empty folder or a staging one
    [line] = refusals  # the one check: the same bundle named the same way by every format
    assert line.startswith("Error: raw/bundles/") and "does not verify (unknown_key at " in line, line
    made = run_cli("export", archive, *targets["wacz"])
    assert made.returncode == 0 and f"({len(suffixes)} bundles inside, " in made.stdout, made.output


@pytest.mark.slow
def test_export_and_verify_count_a_wacz_alike(tmp_path, monkeypatch):
    """The demo run twice, the second without conditional requests: it fetches the 3
    records again, unchanged, and writes revisit records (naming the first run's). The
    export and `verify` give the same count of bundles inside, and the export says how
    many pages list them."""
    run_cli_crawl(tmp_path, logged=False).check()
    run_cli_crawl(tmp_path, "-s", "PITH_CONDITIONAL_REQUESTS=false", logged=False).check()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the demo's archiver key
    archive, wacz = tmp_path / "archive", tmp_path / "out.wacz"
    made = run_cli("export", archive, "--format", "wacz", "--out", wacz, "--with-raw")
    assert made.returncode == 2 and made.stderr == (
        "Error: --with-raw: only with --format parquet (a WACZ holds the bundles as fetched, in its WARC files)\n"
    )
    made = run_cli("export", archive, "--format", "wacz", "--out", wacz).check()
    assert "WARC files (3 bundles inside, 6 pages, " in made.stdout, made.output
    verified = run_cli("verify", wacz).check()
    assert f"VERIFIED    wacz  {wacz}  3 bundles inside\n" in verified.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give --out DEST (and --format bag, release or wacz for other than parquet)"),
        (["--format", "bag", "--out", "s3://b/bag"], "--out s3://b/bag: a bag is written at a new local path"),
        (["--format", "bag", "--out", "b", "--with-raw"], "--with-raw: only with --format parquet (a bag always holds"),
        (["--format", "release", "--out", "d", "--with-raw"], "--with-raw: only with --format parquet (a release"),
        (["--out", "d", "--since", "x"], "--since: only with --format release (a previous release) or wacz"),
        (["--format", "bag", "--out", "b", "--since", "x"], "--since: only with --format release"),
        (["--out", "d", "--source-organization", "Us"], "--source-organization: only with --format bag"),
        (["--format", "wacz", "--out", "x.wacz", "--source-organization", "Us"], "--source-organization: only with"),
        (["--format", "bag", "--out", "b", "--s3-endpoint-url", "http://127.0.0.1:1"], "--s3-endpoint-url applies to"),
        (["--out", "d", "--s3-single-writer"], "--s3-single-writer applies to an s3:// --out, and none was given"),
        # the old names of --out, until the next release: refused as before when they disagree
        (["--bag", "b", "--to", "d"], "--to and --bag: one option, give it once"),
        (["--out", "b", "--to", "d"], "--out and --to: one option, give it once"),
        (["--bag", "b", "--format", "parquet"], "--format parquet does not go with --bag"),
    ],
)
def test_export_usage_errors(tmp_path, args, message):
    """One line each, exit 2, before the archive is read (an option that does not apply
    is refused, never silently ignored)."""
    result = run_cli("export", str(tmp_path), *args)
    assert result.returncode == 2 and result.stdout == "", result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: {message}"), line
