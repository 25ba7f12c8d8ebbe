"""The one way tests read an archive's Parquet tables back: as pyarrow reads them where
they are (a folder, or a bucket through pyarrow's own S3 client), as plain rows."""

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from storage.archive.stores import ObjectStore
from tests.plugins.s3 import arrow_filesystem


def read_rows(archive, table: str, *, columns=None, manifest: dict | None = None, folder: str = "tables") -> list[dict]:
    """The rows of ``table`` in ``archive`` (a folder or an ObjectStore): every file of
    ``FOLDER/TABLE``, hive partition keys as columns; with ``manifest``, only the files
    that manifest lists for the table (what that run committed), in its order."""
    if manifest is not None:
        paths = [entry["path"] for entry in manifest["objects"] if entry.get("table") == table]
        return [
            row
            for path in paths
            for row in pq.read_table(pa.BufferReader(archive.get_bytes(path)), columns=columns).to_pylist()
        ]
    if isinstance(archive, ObjectStore):
        filesystem, base = arrow_filesystem(archive)
    else:
        filesystem, base = None, str(Path(archive))
    dataset = ds.dataset(f"{base}/{folder}/{table}", format="parquet", partitioning="hive", filesystem=filesystem)
    return dataset.to_table(columns=columns).to_pylist()
