"""Object stores on both backends: byte-exact, create-only, idempotent, and loud when
they fail. The S3 cases run against moto's server over HTTP on loopback."""

import base64
import hashlib
import os
import threading
import time

import pytest

from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.open_store import open_store
from storage.archive.s3_store import S3Store
from storage.archive.stores import ObjectExists, ObjectMissing, StorageError
from storage.writing.uploads import BoundedUploader

MiB = 1 << 20


def test_put_bytes_stores_the_exact_bytes(store, real_raw):
    for raw in real_raw.values():
        sha = hashlib.sha256(raw).hexdigest()
        info = store.put_bytes(layout.raw_bundle(sha), raw)
        assert (info.sha256, info.size) == (sha, len(raw))
        assert store.get_bytes(info.path) == raw
        assert store.digest(info.path) == info
    assert sorted(s.path for s in store.list("raw/")) == sorted(
        layout.raw_bundle(hashlib.sha256(raw).hexdigest()) for raw in real_raw.values()
    )


def test_reput_of_the_same_bytes_is_idempotent(store, real_raw):
    raw = next(iter(real_raw.values()))
    path = layout.raw_bundle(hashlib.sha256(raw).hexdigest())
    first = store.put_bytes(path, raw)
    assert store.put_bytes(path, raw) == first
    assert [s.path for s in store.list("raw/")] == [path]


def test_put_refuses_to_replace_other_bytes(store):
    store.put_bytes("manifests/x.json", b"first")
    with pytest.raises(ObjectExists) as caught:
        store.put_bytes("manifests/x.json", b"second")
    assert caught.value.existing.sha256 == hashlib.sha256(b"first").hexdigest()
    assert store.get_bytes("manifests/x.json") == b"first"


def test_put_file_streams_large_objects_create_only(store, tmp_path, request):
    if isinstance(store, S3Store):  # 5 MiB is the smallest part S3 allows: force 3 parts
        store = S3Store(
            store.bucket,
            store.prefix,
            endpoint_url=store.endpoint_url,
            multipart_threshold=5 * MiB,
            multipart_chunksize=5 * MiB,
        )
    big, other = tmp_path / "big.parquet", tmp_path / "other.parquet"
    big.write_bytes(os.urandom(11 * MiB))
    other.write_bytes(os.urandom(11 * MiB))
    info = store.put_file("tables/t/part-0.parquet", big)
    assert info.sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert store.digest(info.path) == info
    assert store.put_file("tables/t/part-0.parquet", big) == info
    with pytest.raises(ObjectExists):
        store.put_file("tables/t/part-0.parquet", other)
    assert store.digest(info.path) == info
    if isinstance(store, S3Store):  # the refused multipart upload was aborted, not left to bill
        uploads = request.getfixturevalue("s3_client").list_multipart_uploads(Bucket=store.bucket)
        assert not uploads.get("Uploads")


def test_s3_objects_carry_sha256_checksums(s3_client, s3_bucket, s3_endpoint):
    S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint).put_bytes("raw/x.json", b"hello")
    head = s3_client.head_object(Bucket=s3_bucket, Key="archive/raw/x.json", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(b"hello").digest()).decode()


def test_the_s3_server_refuses_conditional_overwrites(s3_client, s3_bucket):
    """What S3Store relies on, checked at the protocol level: If-None-Match: * gets 412."""
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"a", IfNoneMatch="*")
    with pytest.raises(s3_client.exceptions.ClientError) as caught:
        s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"b", IfNoneMatch="*")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3_client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"a"


def test_list_delete_and_missing_objects(store):
    store.put_bytes("tables/a/x=1/p.parquet", b"12345")
    store.put_bytes("tables/b/p.parquet", b"1")
    listed = {s.path: s for s in store.list("tables/a/")}
    assert list(listed) == ["tables/a/x=1/p.parquet"] and listed["tables/a/x=1/p.parquet"].size == 5
    assert listed["tables/a/x=1/p.parquet"].modified.tzinfo is not None
    store.delete("tables/a/x=1/p.parquet")
    store.delete("tables/a/x=1/p.parquet")  # gone already: fine
    assert [s.path for s in store.list("tables/")] == ["tables/b/p.parquet"]
    with pytest.raises(ObjectMissing):
        store.get_bytes("tables/a/x=1/p.parquet")


@pytest.mark.parametrize("path", ["../escape.json", "/abs.json", "raw//x.json", "raw/./x.json", "a\\b"])
def test_paths_cannot_leave_the_archive(store, path):
    with pytest.raises(layout.LayoutError):
        store.put_bytes(path, b"x")


def test_local_store_leaves_no_temp_files(tmp_path):
    store = LocalStore(tmp_path)
    store.put_bytes("raw/a.json", b"x")
    with pytest.raises(ObjectExists):
        store.put_bytes("raw/a.json", b"y")
    store.flush()
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["a.json"]
    assert (tmp_path / "raw" / "a.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_local_objects_are_readable_by_all_whatever_the_umask(tmp_path, umask):
    """The archive is served as a mirror: its objects are 0644 under any umask, and an
    object is never replaced: the same bytes again are settled, others refused."""
    previous = os.umask(umask)
    try:
        store = LocalStore(tmp_path)
        first = store.put_bytes("raw/a.json", b"x")
        assert store.put_bytes("raw/a.json", b"x") == first
        with pytest.raises(ObjectExists):
            store.put_bytes("raw/a.json", b"y")
    finally:
        os.umask(previous)
    assert (tmp_path / "raw" / "a.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "raw" / "a.json").read_bytes() == b"x"
    assert [p.name for p in (tmp_path / "raw").iterdir()] == ["a.json"]


def test_a_local_write_steps_over_a_killed_runs_temp_file_and_syncs_new_folders(tmp_path):
    """Temp names are the process id and a counter: a killed run of a process with the
    same id may have left one behind, which is neither reused nor removed."""
    (tmp_path / "raw" / "ab").mkdir(parents=True)
    leftover = tmp_path / "raw" / "ab" / f"{layout.TEMP_PREFIX}{os.getpid()}-0"
    leftover.write_bytes(b"a killed run's partial write")
    store = LocalStore(tmp_path)
    store.put_bytes("raw/ab/a.json", b"x")
    store.put_bytes("tables/t/p=1/b.parquet", b"y")
    assert (tmp_path / "raw" / "ab" / "a.json").read_bytes() == b"x"
    assert leftover.read_bytes() == b"a killed run's partial write"
    # the file's folder, and every folder the write created with the one holding it
    root = str(tmp_path)
    assert store.unsynced_folders == {
        f"{root}/raw/ab",
        f"{root}/raw",
        root,
        f"{root}/tables/t/p=1",
        f"{root}/tables/t",
        f"{root}/tables",
    }
    store.flush()
    assert not store.unsynced_folders


def test_a_failing_local_store_raises_storage_error(tmp_path):
    (tmp_path / "file").write_bytes(b"not a folder")
    with pytest.raises(StorageError, match="cannot write"):
        LocalStore(tmp_path / "file").put_bytes("raw/a.json", b"x")


@pytest.mark.parametrize("operation", ["write", "list", "read", "probe"])
def test_an_unreachable_s3_endpoint_fails_at_once_despite_the_retries(s3_env, refused_port, operation):
    """The retries with backoff (10 attempts by default) are for a store that answered;
    one that refuses connections fails the first operation at once, naming why."""
    store = S3Store("pith-test", endpoint_url=f"http://127.0.0.1:{refused_port}")
    act = {
        "write": lambda: store.put_bytes("raw/a.json", b"x"),
        "list": lambda: list(store.list("manifests/")),
        "read": lambda: store.get_bytes("manifests/a.json"),
        "probe": store.probe,
    }[operation]
    started = time.monotonic()
    with pytest.raises(StorageError, match=f"127.0.0.1:{refused_port}.*connection refused"):
        act()
    assert time.monotonic() - started < 5  # before: 17 to 38 s of retries


def test_open_store_takes_the_endpoint_from_the_environment(s3_endpoint, s3_bucket, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    store = open_store(f"s3://{s3_bucket}/some/prefix")
    assert (store.bucket, store.prefix, store.endpoint_url) == (s3_bucket, "some/prefix", s3_endpoint)
    store.put_bytes("raw/a.json", b"x")
    assert [s.path for s in store.list()] == ["raw/a.json"]


def test_open_store_local_forms(tmp_path):
    assert open_store(str(tmp_path)).root == tmp_path
    assert open_store(tmp_path.as_uri()).root == tmp_path
    with pytest.raises(ValueError):
        open_store("gs://bucket/x")
    with pytest.raises(ValueError):
        open_store(str(tmp_path), endpoint_url="http://127.0.0.1:9")


def test_uploader_bounds_the_bytes_in_flight():
    uploader = BoundedUploader(max_bytes_in_flight=10, workers=2)
    gate = threading.Event()
    first = uploader.submit(6, gate.wait)
    assert uploader.bytes_in_flight == 6
    with pytest.raises(TimeoutError):
        uploader.submit(6, gate.wait, timeout=0.2)  # 12 > 10: must wait
    small = uploader.submit(4, lambda: "fits")
    assert small.result(5) == "fits"
    gate.set()
    assert first.result(5) is True
    assert uploader.submit(6, lambda: 6).result(5) == 6
    uploader.close()
    assert uploader.bytes_in_flight == 0


def test_uploader_admits_one_oversized_job_alone():
    uploader = BoundedUploader(max_bytes_in_flight=1, workers=1)
    assert uploader.submit(100, lambda: "big").result(5) == "big"
    uploader.close()
