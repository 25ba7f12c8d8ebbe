"""The archive at rest: the object stores (a folder, S3), the layout, the Parquet tables and
their rows, the signed manifests, reading what they commit, and the dedup history."""
