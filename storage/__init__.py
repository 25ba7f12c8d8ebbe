"""The archive: immutable objects (local folder or S3), Parquet tables, signed manifests.

Its wings, each importing only the ones below it (tests/test_layers.py): ``runtime``
(process plumbing: watched children, one HTTP deadline) and ``archive``, the archive at
rest; ``capture`` (WARC, CDXJ, WACZ) and ``transparency`` (attestations and their logs)
on it; ``publishing`` (exports, releases) and ``writing`` (a run, written and
committed) on those; ``serving`` (the resolver server, an archive served as a mirror)
beside publishing, and ``witness`` (a C2SP tlog-witness) beside transparency; ``audit``
and ``log_proofs`` on top. docs/ARCHIVE.md describes the layout, the table schemas and
the manifest format.
"""
