"""The archive: immutable objects (local folder or S3), Parquet tables, signed manifests.

docs/ARCHIVE.md describes the layout, the table schemas and the manifest format.
"""
