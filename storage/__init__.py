"""The archive: immutable objects (local folder or S3), Parquet tables, signed manifests.

Its wings, each importing only the ones below it (tests/test_layers.py): ``archive``, the
archive at rest; ``capture`` (WARC, CDXJ, WACZ) and ``transparency`` (attestations and
their logs) on it; ``publishing`` (exports, releases) and ``writing`` (a run, written and
committed) on those; ``audit`` and ``log_proofs`` on top. docs/ARCHIVE.md describes the
layout, the table schemas and the manifest format.
"""
