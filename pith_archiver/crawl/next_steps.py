"""What to run next on an archive just crawled, printed as commands that work as printed.

Each line is quoted for a POSIX shell (``shlex``) and carries what the crawl was
given to reach and trust the archive: the S3 endpoint, the keyrings, the signing key.
An archive on S3 is read through pyarrow's own S3 client (the AWS variables give it
the credentials), so DuckDB needs no extension downloaded to query it. A store that
answers a ranged read with the whole object's checksum (rclone's ``serve s3``, as its
write probe found: ``storage.archive.s3_writes``) would fail pyarrow's reads with
"Response checksums mismatch": those lines then ask the AWS SDK to check response
checksums only where an operation requires them (the audit checks every byte anyway).
"""

import json
import shlex
from urllib.parse import urlsplit

from storage.archive.s3_store import S3Store
from storage.archive.stores import ObjectStore

from ..reading.s3_sources import SCHEME
from .options import CrawlOptions

RECORDS = "tables/records"
BY_YEAR = "SELECT year, count(*) AS records FROM records GROUP BY year ORDER BY year"
RANGES_CHECKED_WHOLE = "AWS_RESPONSE_CHECKSUM_VALIDATION=when_required"  # the AWS SDKs' setting, pyarrow's too


def next_steps(options: CrawlOptions, store: ObjectStore | None = None) -> str:
    """The audit, a DuckDB query and a pyarrow count of the archive ``options`` wrote
    (into ``store``, as the crawl probed it)."""
    promises = store.promises if isinstance(store, S3Store) else None
    env = (RANGES_CHECKED_WHOLE,) if promises is not None and promises.whole_checksum_on_ranges else ()
    return (
        f"Audit it:\n  {audit_command(options)}\n"
        f"Query it, for example with DuckDB (pip install duckdb):\n  {python_line(duckdb_code(options), env)}\n"
        f"or with pyarrow:\n  {python_line(pyarrow_code(options), env)}"
    )


def audit_command(options: CrawlOptions) -> str:
    """``pith-archiver audit`` of the archive, trusting what the crawl trusted."""
    args = ["pith-archiver", "audit", options.archive]
    if options.s3_endpoint_url:
        args += ["--s3-endpoint-url", options.s3_endpoint_url]
    for keyring in (*options.keyrings, *options.archive_keyrings):
        args += ["--keyring", keyring]
    if options.no_default_keys:
        args.append("--no-default-keys")
    if options.signing_key:
        args += ["--signing-key", options.signing_key]
    return shlex.join(args)


def duckdb_code(options: CrawlOptions) -> str:
    if options.archive.startswith(SCHEME):
        records = f"records = {dataset(options)}"
        return f"import duckdb, pyarrow.dataset as ds, pyarrow.fs as fs; {records}; {show(BY_YEAR)}"
    files = _literal(f"{options.archive.rstrip('/')}/{RECORDS}/**/*.parquet")
    return f"import duckdb; records = duckdb.read_parquet({files}, hive_partitioning=True); {show(BY_YEAR)}"


def pyarrow_code(options: CrawlOptions) -> str:
    modules = (
        "pyarrow.dataset as ds, pyarrow.fs as fs" if options.archive.startswith(SCHEME) else "pyarrow.dataset as ds"
    )
    return f"import {modules}; print({dataset(options)}.to_table().num_rows)"


def dataset(options: CrawlOptions) -> str:
    """Python for the records table as a pyarrow dataset, in its folder or bucket."""
    location = f"{options.archive.rstrip('/')}/{RECORDS}"
    if not location.startswith(SCHEME):
        return f"ds.dataset({_literal(location)}, partitioning={_literal('hive')})"
    endpoint = ""
    if options.s3_endpoint_url:
        parts = urlsplit(options.s3_endpoint_url)
        endpoint = f"endpoint_override={_literal(parts.netloc)}, scheme={_literal(parts.scheme or 'https')}"
    filesystem = f"fs.S3FileSystem({endpoint})"
    return f"ds.dataset({_literal(location[len(SCHEME) :])}, filesystem={filesystem}, partitioning={_literal('hive')})"


def show(sql: str) -> str:
    return f"duckdb.sql({_literal(sql)}).show()"


def python_line(code: str, env: tuple[str, ...] = ()) -> str:
    """``python -c CODE``, after the variables ``env`` sets (``NAME=value``, as a shell reads them)."""
    return " ".join([*env, shlex.join(["python", "-c", code])])


def _literal(text: str) -> str:
    """A Python string literal in double quotes (a JSON string is one), so that the
    shell's single quotes around the code rarely need escaping."""
    return json.dumps(text, ensure_ascii=False)
