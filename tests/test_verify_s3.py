"""``verify`` reads from S3 as from a folder: an archive prefix (its raw bundles and
feeds), a single object, and a dataset release (its release.json), through
``--s3-endpoint-url`` or the AWS variables, against the moto server; a missing object
or bucket is one line naming it."""

import pytest

from storage.archive.s3_store import S3Store
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, tampered, write_run
from tests.plugins.cli import run_cli

pytestmark = pytest.mark.slow  # the moto server


@pytest.fixture
def on_s3(tmp_path, corpus_dir, corpus_keyring, test_signer, s3_bucket, s3_endpoint):
    """An archive of 4 bundles at s3://BUCKET/archive and its release at s3://BUCKET/release,
    made by `export`; the options that trust both."""
    raws = list(corpus_raws(corpus_dir).values())[:4]
    write_run(S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint), test_signer, corpus_keyring, raws)
    key = tmp_path / "archiver-key.json"
    test_signer.save(key)
    keys = ["--no-default-keys", "--keyring", corpus_dir / KEYRING_NAME, "--keyring", key]
    endpoint = ["--s3-endpoint-url", s3_endpoint]
    release = ["--format", "release", "--out", f"s3://{s3_bucket}/release", "--signing-key", key]
    released = run_cli("export", f"s3://{s3_bucket}/archive", *release, *endpoint, *keys)
    assert released.returncode == 0, released.output
    return keys


def test_an_archive_prefix_reads_as_the_same_folder_would(tmp_path, on_s3, s3_bucket, s3_endpoint):
    endpoint = ["--s3-endpoint-url", s3_endpoint]
    remote = run_cli("verify", f"s3://{s3_bucket}/archive", *endpoint, *on_s3)
    assert remote.returncode == 0, remote.output
    folder = tmp_path / "copy"
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    for stored in store.list():
        (folder / stored.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / stored.path).write_bytes(store.get_bytes(stored.path))
    local = run_cli("verify", folder, *on_s3)
    assert remote.stdout == local.stdout.replace(str(folder), f"s3://{s3_bucket}/archive")
    assert remote.stdout.count("VERIFIED    pith:") == 4 and "VERIFIED    feed  s3://" in remote.stdout
    assert remote.stdout.endswith("5 verified, 0 rejected, 2 skipped (not bundles)\n")

    bundle = next(line.split()[2] for line in remote.stdout.splitlines() if line.startswith("VERIFIED    pith:"))
    one = run_cli("verify", bundle, *endpoint, *on_s3)
    assert one.returncode == 0 and one.stdout.endswith("1 verified, 0 rejected\n"), one.output
    key = bundle.removeprefix(f"s3://{s3_bucket}/archive/")
    store.replace_bytes(key, tampered(store.get_bytes(key)))
    again = run_cli("verify", bundle, *endpoint, *on_s3)
    assert again.returncode == 1 and "REJECTED    pith:" in again.stdout, again.output


def test_a_release_on_s3_and_the_aws_variables(on_s3, s3_bucket, s3_endpoint, s3_client, monkeypatch):
    release = f"s3://{s3_bucket}/release/release.json"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)  # the endpoint as the AWS variables give it
    verified = run_cli("verify", release, *on_s3)
    assert verified.returncode == 0 and verified.stdout.startswith(f"VERIFIED    -  {release}\n"), verified.output
    listed = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="release/data/records/")["Contents"][0]["Key"]
    s3_client.put_object(Bucket=s3_bucket, Key=listed, Body=b"not the file the release lists")
    altered = run_cli("verify", release, *on_s3)
    assert altered.returncode == 1 and "release_file_mismatch" in altered.stdout, altered.output


def test_what_cannot_be_read_on_s3_is_named(on_s3, s3_bucket, s3_endpoint, tmp_path):
    endpoint = ["--s3-endpoint-url", s3_endpoint]
    missing = run_cli("verify", f"s3://{s3_bucket}/archive/raw/nothing.json", *endpoint, *on_s3)
    assert missing.returncode == 4
    assert f"UNREADABLE  s3://{s3_bucket}/archive/raw/nothing.json  s3://{s3_bucket}: no object" in missing.stdout
    no_bucket = run_cli("verify", "s3://pith-no-such-bucket/archive", *endpoint, *on_s3)
    assert no_bucket.returncode == 2 and no_bucket.stdout == ""  # the setup's to fix, as in every command
    [line] = no_bucket.stderr.splitlines()
    assert line.startswith("Error: s3://pith-no-such-bucket: bucket pith-no-such-bucket does not exist")
    local_only = run_cli("verify", tmp_path, *endpoint)
    assert local_only.returncode == 2
    assert local_only.stderr == "Error: --s3-endpoint-url applies to s3:// locations, and none was given\n"
