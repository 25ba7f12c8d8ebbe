"""rclone's ``serve s3`` (tests/plugins/rclone.py), an S3-compatible server people run,
which ignores ``If-None-Match: *``: the archive refuses it before writing anything,
runs on it as its single writer when told so (a lease object held for the run), and
everything an operator does with an archive works there as with moto: crawl, audit,
the printed next steps, a sync from it, an export to it, audit's printed fix for an
unpinned key, and ``rclone copy`` between the bucket and a folder."""

import re

import boto3
import pytest

from storage.archive.layout import WRITER_LEASE
from tests.plugins.cli import run_cli
from tests.test_printed_commands import printed_steps, run_as_printed

pytestmark = pytest.mark.slow


def error_line(result, code: int = 2) -> str:
    """The one line a refusal prints, once the command exited ``code``."""
    assert result.returncode == code, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    return line


def objects(rclone_endpoint, bucket: str, prefix: str = "") -> list[str]:
    folder = rclone_endpoint.root / bucket / prefix
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def crawl_demo(tmp_path, url: str, archive: str, *more: str):
    return run_cli("crawl", "--out", archive, "--s3-endpoint-url", url, *more, home=tmp_path, timeout=300)


@pytest.fixture
def rclone_archive(tmp_path, rclone_endpoint, rclone_bucket):
    """The embedded demo crawled into the rclone bucket as its single writer: (uri, stdout, stderr)."""
    archive = f"s3://{rclone_bucket}/demo"
    crawled = crawl_demo(tmp_path, rclone_endpoint.url, archive, "--s3-single-writer").check()
    return archive, crawled.stdout, crawled.stderr


def test_a_store_that_ignores_create_only_puts_is_refused_before_anything_is_written(
    tmp_path, rclone_endpoint, rclone_bucket
):
    refused = crawl_demo(tmp_path, rclone_endpoint.url, f"s3://{rclone_bucket}/demo")
    line = error_line(refused)
    assert "does not honour conditional writes (If-None-Match: *)" in line and "--s3-single-writer" in line
    assert objects(rclone_endpoint, rclone_bucket) == []  # the probe object removed, nothing else written
    assert not (tmp_path / "config").exists()  # and no signing key made


def test_its_single_writer_crawls_audits_and_the_printed_steps_run_as_printed(
    tmp_path, rclone_endpoint, rclone_bucket, rclone_archive
):
    archive, stdout, stderr = rclone_archive
    assert f"as its single writer, holding {WRITER_LEASE}" in stderr
    assert WRITER_LEASE not in objects(rclone_endpoint, rclone_bucket, "demo")  # let go when the crawl ended
    steps = printed_steps(stdout)
    assert steps[0] == f"pith-archiver audit {archive} --s3-endpoint-url {rclone_endpoint.url}"
    # rclone answers a ranged read with the whole object's checksum, which pyarrow's SDK checks
    assert all(step.startswith("AWS_RESPONSE_CHECKSUM_VALIDATION=when_required python -c ") for step in steps[1:])
    audit, duckdb, pyarrow = (run_as_printed(step, tmp_path) for step in steps)
    assert audit.returncode == 0 and audit.stdout.splitlines()[-1].startswith("clean: "), audit.stderr
    assert duckdb.returncode == 0 and re.search(r"│\s+2019 │\s+2 │", duckdb.stdout), duckdb.stderr
    assert pyarrow.returncode == 0 and pyarrow.stdout.strip() == "3", pyarrow.stderr
    unchecked = run_as_printed(steps[2].split(" ", 1)[1], tmp_path)  # what the variable is for
    assert unchecked.returncode != 0 and "Response checksums mismatch" in unchecked.stderr


def test_a_second_writer_finds_the_lease_and_writes_nothing(tmp_path, rclone_endpoint, rclone_bucket, rclone_archive):
    archive, _, _ = rclone_archive
    client = boto3.client("s3", endpoint_url=rclone_endpoint.url)
    holder = b'{"holder": "other-host.4242", "since": "2026-12-01T03:15:00Z"}\n'
    client.put_object(Bucket=rclone_bucket, Key=f"demo/{WRITER_LEASE}", Body=holder)
    before = objects(rclone_endpoint, rclone_bucket, "demo")
    line = error_line(crawl_demo(tmp_path, rclone_endpoint.url, archive, "--s3-single-writer"))
    assert "held by other-host.4242 since 2026-12-01T03:15:00Z" in line and "only one writer" in line
    assert f"delete {archive}/{WRITER_LEASE}" in line
    assert objects(rclone_endpoint, rclone_bucket, "demo") == before  # its lease kept, nothing written


def test_audits_printed_fix_for_an_unpinned_key_runs_as_printed(tmp_path, rclone_endpoint, rclone_archive):
    """Another machine audits with none of the archive's keys: the fix it prints, an
    --keyring of the key document in the bucket, works as printed."""
    archive, _, _ = rclone_archive
    elsewhere = tmp_path / "auditor"
    elsewhere.mkdir()
    first = run_cli("audit", archive, "--s3-endpoint-url", rclone_endpoint.url, home=elsewhere)
    assert first.returncode in (1, 2), first.output[-2000:]
    [keyring] = re.findall(r"pass --keyring (s3://\S+) after checking its fingerprint", first.output)
    fixed = run_cli("audit", archive, "--s3-endpoint-url", rclone_endpoint.url, "--keyring", keyring, home=elsewhere)
    assert fixed.returncode == 0 and fixed.stdout.splitlines()[-1].startswith("clean: "), fixed.output[-2000:]


def test_a_sync_from_it_and_an_export_to_it(tmp_path, rclone_endpoint, rclone_bucket, rclone_archive):
    archive, _, _ = rclone_archive
    endpoint = ["--s3-endpoint-url", rclone_endpoint.url]
    [key_document] = objects(rclone_endpoint, rclone_bucket, "demo/keys")
    peer_key = f"{archive}/keys/{key_document}"
    copier = tmp_path / "copier"
    copier.mkdir()
    synced = run_cli("sync", archive, "--keyring", peer_key, *endpoint, "--out", copier / "copy", home=copier)
    synced.check(0)
    assert "3 archived new, 0 already held, 0 quarantined" in synced.stdout, synced.output[-3000:]
    assert run_cli("audit", copier / "copy", home=copier).check().stdout.splitlines()[-1].startswith("clean: ")

    export = ["export", copier / "copy", "--format", "parquet", "--out", f"s3://{rclone_bucket}/export", *endpoint]
    line = error_line(run_cli(*export, home=copier))
    assert line.startswith("Error: --out: ") and "conditional writes" in line and "--s3-single-writer" in line
    assert objects(rclone_endpoint, rclone_bucket, "export") == []
    run_cli(*export, "--s3-single-writer", home=copier).check()
    exported = objects(rclone_endpoint, rclone_bucket, "export")
    assert "README.md" in exported and any(path.startswith("tables/records/") for path in exported)
    assert WRITER_LEASE not in exported


def test_an_archive_copied_with_rclone_between_the_bucket_and_a_folder_audits_clean_at_both_ends(
    tmp_path, rclone_endpoint, rclone_bucket, rclone_archive
):
    archive, _, _ = rclone_archive
    rclone_endpoint.run("copy", rclone_endpoint.remote(f"{rclone_bucket}/demo"), str(tmp_path / "folder"))
    in_folder = run_cli("audit", tmp_path / "folder", home=tmp_path).check()
    assert in_folder.stdout.splitlines()[-1].startswith("clean: 1 manifest, ")
    rclone_endpoint.run("copy", str(tmp_path / "folder"), rclone_endpoint.remote(f"{rclone_bucket}/copied"))
    back = run_cli("audit", f"s3://{rclone_bucket}/copied", "--s3-endpoint-url", rclone_endpoint.url, home=tmp_path)
    assert back.check().stdout.splitlines()[-1] == in_folder.stdout.splitlines()[-1]
