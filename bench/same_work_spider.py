"""The same-work baseline for bench_crawl.py (issue 64): the program a user would write
for the crawl's work without this project, one Scrapy spider in one process, doing
the work in its callback:

- every hash and signature of each bundle checked with json + hashlib + pynacl
  (bench/minimal_verify.py's ``MinimalVerifier``, under the corpus's pinned keyring);
- the raw bytes kept content-addressed (``objects/ab/abcd...``, written create-only);
- a WARC/1.1 request and response record of every exchange, written with warcio
  (gzip, one member a record, warcio's defaults);
- at the end, one Parquet table of the bundles (pyarrow), an Ed25519-signed
  attestation per bundle (the object's hash, its URL and when it was fetched), and a
  manifest naming every file with its SHA-256, signed (pynacl).

Run as ``python bench/same_work_spider.py URLS_FILE SETTINGS_JSON REPORT_JSON OUT
KEYRING`` from a folder outside any Scrapy project, with the bare spider's settings
(bench_crawl.shared_settings: the crawl's transport settings and process knobs); it
writes REPORT_JSON as bench/plain_spider.py does, with the bundles verified and stored.
"""

import base64
import hashlib
import io
import json
import os
import sys
from datetime import datetime, timezone
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from minimal_verify import MinimalVerifier
from nacl.signing import SigningKey
from plain_spider import PlainSpider
from scrapy.crawler import CrawlerProcess
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from pith_archiver.crawl import tuning


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def headers_of(headers) -> list[tuple[str, str]]:
    """Scrapy's headers as warcio takes them: one (name, value) pair a value."""
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, values in headers.items() for value in values]


class SameWorkSpider(PlainSpider):
    name = "samework"

    def __init__(self, urls_file, report, out, keyring, **kwargs):
        super().__init__(urls_file, report, **kwargs)
        self.out = out
        keys = json.loads(open(keyring).read())["keys"]
        self.verifier = MinimalVerifier({k["key_id"]: base64.b64decode(k["public_key_b64"]) for k in keys})
        self.signer = SigningKey(hashlib.sha256(b"same-work baseline").digest())
        os.makedirs(os.path.join(out, "objects"), exist_ok=True)
        self.warc_file = open(os.path.join(out, "crawl.warc.gz"), "wb")
        self.warc = WARCWriter(self.warc_file, gzip=True, warc_version="WARC/1.1")
        self.rows: list[dict] = []
        self.rejected = 0

    def parse(self, response):
        self.crawler.stats.inc_value("plain/bodies")
        body = response.body
        fetched = datetime.now(timezone.utc).isoformat()
        request = response.request
        target = urlsplit(response.url)
        request_headers = StatusAndHeaders(
            f"{request.method} {target.path or '/'}{'?' + target.query if target.query else ''} HTTP/1.1",
            headers_of(request.headers),
            is_http_request=True,
        )
        self.warc.write_record(self.warc.create_warc_record(response.url, "request", http_headers=request_headers))
        response_headers = StatusAndHeaders(f"{response.status} OK", headers_of(response.headers), protocol="HTTP/1.1")
        self.warc.write_record(
            self.warc.create_warc_record(
                response.url, "response", payload=io.BytesIO(body), http_headers=response_headers
            )
        )
        if not self.verifier.verify(body):
            self.rejected += 1
            return
        digest = hashlib.sha256(body).hexdigest()
        folder = os.path.join(self.out, "objects", digest[:2])
        os.makedirs(folder, exist_ok=True)
        try:
            with open(os.path.join(folder, digest), "xb") as handle:
                handle.write(body)
        except FileExistsError:
            pass
        bundle = json.loads(body)
        self.rows.append(
            {
                "pith_number": bundle["pith_number"],
                "canonical_sha256": bundle["canonical_sha256"],
                "object_sha256": digest,
                "size": len(body),
                "url": response.url,
                "fetched_at": fetched,
                "key_id": bundle["bundle_signature"]["key_id"],
            }
        )

    def closed(self, reason):
        self.warc_file.close()
        table = os.path.join(self.out, "bundles.parquet")
        pq.write_table(pa.Table.from_pylist(self.rows), table)
        attestations = os.path.join(self.out, "attestations.jsonl")
        with open(attestations, "w") as handle:
            for row in self.rows:
                statement = json.dumps(
                    {k: row[k] for k in ("pith_number", "object_sha256", "url", "fetched_at")},
                    sort_keys=True,
                    separators=(",", ":"),
                ).encode()
                signature = self.signer.sign(statement).signature
                handle.write(
                    json.dumps({"statement": statement.decode(), "signature_b64": base64.b64encode(signature).decode()})
                    + "\n"
                )
        files = {name: sha256_file(os.path.join(self.out, name)) for name in ("crawl.warc.gz", "bundles.parquet")}
        files["attestations.jsonl"] = sha256_file(attestations)
        manifest = json.dumps({"files": files, "bundles": len(self.rows)}, sort_keys=True).encode()
        with open(os.path.join(self.out, "manifest.json"), "w") as handle:
            json.dump(
                {
                    "manifest": manifest.decode(),
                    "signature_b64": base64.b64encode(self.signer.sign(manifest).signature).decode(),
                },
                handle,
            )
        super().closed(reason)

    def summary(self) -> dict:
        return {**super().summary(), "stored": len(self.rows), "rejected": self.rejected}


if __name__ == "__main__":
    tuning.economise()  # before anything allocates, as the crawl's entry does
    urls_file, settings_json, report, out, keyring = sys.argv[1:6]
    settings = json.loads(settings_json)
    settings.pop("PLAIN_JSON_CHARSET", False)
    process = CrawlerProcess(settings)
    process.crawl(SameWorkSpider, urls_file=urls_file, report=report, out=out, keyring=keyring)
    with tuning.root_log_level(process.settings.get("LOG_LEVEL")):
        process.start()
