"""``pith-archiver verify X.wacz``: the signed digest under the pinned archive key, every
resource, then each bundle inside; hostile packages (an edit, a zip bomb, a name that
leaves the package, no digest, not a ZIP) draw a named reason, never a traceback.

The packages here are made as ``export --format wacz`` makes them (real WARC records
written by warcio, the digest signed by the storage layer's own ``sign_digest``), small
enough to build in milliseconds; tests/test_warc.py verifies a real export too."""

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from pith.signing import Signer
from storage.capture.wacz import sign_digest
from tests.plugins.cli import run_cli
from tests.tamper import tampered

SIGNER = Signer.generate("wacz-test")
WARC = "archive/run-1.warc.gz"
STAMP = "2026-11-20T10:00:00Z"


def warc_of(bundles: dict[str, bytes]) -> bytes:
    """One WARC of a response record per bundle URL, at STAMP."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
    for url, raw in bundles.items():
        http = StatusAndHeaders("200 OK", [("Content-Type", "application/json")], protocol="HTTP/1.1")
        record = writer.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(raw),
            length=len(raw),
            http_headers=http,
            warc_headers_dict={"WARC-Date": STAMP},
        )
        writer.write_record(record)
    return out.getvalue()


def package(path: Path, members: dict[str, bytes], signer: Signer = SIGNER, listed: dict | None = None) -> Path:
    """A WACZ of ``members``, ``datapackage.json`` listing ``listed`` (default: them all)
    and its digest signed by ``signer``."""
    resources = [
        {
            "name": name.rsplit("/", 1)[-1],
            "path": name,
            "hash": f"sha256:{hashlib.sha256(data).hexdigest()}",
            "bytes": len(data),
        }
        for name, data in (members if listed is None else listed).items()
    ]
    datapackage = json.dumps({"profile": "data-package", "resources": resources}).encode()
    sha256 = hashlib.sha256(datapackage).hexdigest()
    digest = sign_digest({"path": "datapackage.json", "hash": f"sha256:{sha256}"}, sha256, signer)
    with zipfile.ZipFile(path, "w") as out:
        for name, data in members.items():
            out.writestr(
                name, data, compress_type=zipfile.ZIP_STORED if name.startswith("archive/") else zipfile.ZIP_DEFLATED
            )
        out.writestr("datapackage.json", datapackage)
        out.writestr("datapackage-digest.json", json.dumps(digest))
    return path


@pytest.fixture
def contents(real_raw) -> dict[str, bytes]:
    """A WARC of the real bundles and the page list naming them."""
    bundles = {f"https://pith.science/pith/{suffix}/bundle.json": raw for suffix, raw in sorted(real_raw.items())}
    pages = [{"format": "json-pages-1.0", "id": "pages"}] + [{"url": url, "ts": STAMP} for url in bundles]
    return {WARC: warc_of(bundles), "pages/pages.jsonl": "".join(json.dumps(p) + "\n" for p in pages).encode()}


@pytest.fixture
def machine_key(tmp_path):
    """This machine's archiver key is SIGNER's (verify trusts it with no option)."""
    SIGNER.save(tmp_path / "config" / "pith-archiver" / "signing-key.json")


def test_a_signed_wacz_verifies_with_each_bundle_inside(tmp_path, contents, real_raw, machine_key):
    wacz = package(tmp_path / "x.wacz", contents)
    result = run_cli("verify", wacz)
    assert result.returncode == 0, result.output
    lines = result.stdout.splitlines()
    assert sum(line.startswith("VERIFIED    pith:") for line in lines) == len(real_raw)
    assert f"{wacz}#{WARC}@0" in lines[0]
    assert lines[-2] == f"VERIFIED    wacz  {wacz}  {len(real_raw)} bundles inside"
    assert lines[-1] == f"{len(real_raw) + 1} verified, 0 rejected"
    as_json = [json.loads(line) for line in run_cli("verify", "--json", wacz).stdout.splitlines()]
    assert [record["status"] for record in as_json] == ["verified"] * (len(real_raw) + 1)


def test_a_wacz_signed_by_a_key_not_pinned_is_unknown_key(tmp_path, contents):
    wacz = package(tmp_path / "x.wacz", contents)  # no machine key here: SIGNER is pinned nowhere
    result = run_cli("verify", wacz)
    assert result.returncode == 1 and "unknown_key at pith_signature" in result.output, result.output
    pinned = tmp_path / "key.json"
    SIGNER.save(pinned)
    assert run_cli("verify", "--keyring", pinned, wacz).returncode == 0


def edited_datapackage(path: Path, contents: dict) -> None:
    package(path, contents)
    with zipfile.ZipFile(path) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    members["datapackage.json"] = members["datapackage.json"].replace(b"data-package", b"data-pockage")
    with zipfile.ZipFile(path, "w") as out:
        for name, data in members.items():
            out.writestr(name, data)


def edited_warc(path: Path, contents: dict) -> None:
    """The WARC's bytes changed after the package was signed."""
    listed = dict(contents)
    contents = {**contents, WARC: warc_of({"https://pith.science/pith/X/bundle.json": b"{}"})}
    package(path, contents, listed=listed)


def a_forged_bundle_inside(path: Path, contents: dict, real_raw) -> None:
    """A package honestly signed over a WARC whose bundle was tampered with before."""
    suffix, raw = sorted(real_raw.items())[0]
    url = f"https://pith.science/pith/{suffix}/bundle.json"
    pages = json.dumps({"format": "json-pages-1.0"}) + "\n" + json.dumps({"url": url, "ts": STAMP}) + "\n"
    forged = {WARC: warc_of({url: tampered(raw, "title_hash_char_changed")}), "pages/pages.jsonl": pages.encode()}
    package(path, forged)


def unlisted_member(path: Path, contents: dict) -> None:
    package(path, {**contents, "archive/extra.warc.gz": contents[WARC]}, listed=contents)


def leaves_the_package(path: Path, contents: dict) -> None:
    package(path, {**contents, "../../etc/cron.d/x": b"* * * * * root true"})


def zip_bomb(path: Path, contents: dict) -> None:
    package(path, {**contents, "indexes/index.cdx": b"\0" * (64 << 20)})


def bzip2_member(path: Path, contents: dict) -> None:
    package(path, contents)
    with zipfile.ZipFile(path, "a") as out:
        out.writestr("indexes/more.cdx", b"x" * 1000, compress_type=zipfile.ZIP_BZIP2)


def no_digest(path: Path, contents: dict) -> None:
    with zipfile.ZipFile(path, "w") as out:
        for name, data in contents.items():
            out.writestr(name, data)


def not_a_zip(path: Path, contents: dict) -> None:
    path.write_bytes(contents[WARC])


@pytest.mark.parametrize(
    "hostile, reason",
    [
        (edited_datapackage, "manifest_hash_mismatch"),
        (edited_warc, "wacz_resource_mismatch"),
        (unlisted_member, "wacz_resource_mismatch"),
        (leaves_the_package, "wacz_unsafe_member"),
        (zip_bomb, "wacz_unsafe_member"),
        (bzip2_member, "wacz_unsafe_member"),
        (no_digest, "wacz_malformed"),
        (not_a_zip, "wacz_malformed"),
    ],
)
def test_a_hostile_wacz_is_rejected_with_its_reason(tmp_path, contents, machine_key, hostile, reason):
    wacz = tmp_path / "x.wacz"
    hostile(wacz, contents)
    result = run_cli("verify", wacz)
    assert result.returncode == 1, result.output
    assert f"REJECTED    wacz  {wacz}  {reason}" in result.stdout, result.output
    assert "Traceback" not in result.output and result.stdout.splitlines()[-1] == "0 verified, 1 rejected"


def test_a_forged_bundle_inside_a_signed_wacz_is_rejected(tmp_path, contents, real_raw, machine_key):
    wacz = tmp_path / "x.wacz"
    a_forged_bundle_inside(wacz, contents, real_raw)
    result = run_cli("verify", wacz)
    assert result.returncode == 1, result.output
    assert f"{wacz}#{WARC}@0" in result.stdout and "REJECTED    pith:" in result.stdout
    assert result.stdout.splitlines()[-1] == "1 verified, 1 rejected"  # the package holds; its bundle does not


@pytest.mark.slow  # the moto server
def test_a_wacz_on_s3_verifies_as_the_file_does(tmp_path, contents, machine_key, s3_client, s3_bucket, s3_endpoint):
    wacz = package(tmp_path / "x.wacz", contents)
    s3_client.upload_file(str(wacz), s3_bucket, "exports/x.wacz")
    remote = run_cli("verify", f"s3://{s3_bucket}/exports/x.wacz", "--s3-endpoint-url", s3_endpoint)
    assert remote.returncode == 0, remote.output
    assert remote.stdout == run_cli("verify", wacz).stdout.replace(str(wacz), f"s3://{s3_bucket}/exports/x.wacz")
