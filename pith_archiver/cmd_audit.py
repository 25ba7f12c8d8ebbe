"""``pith-archiver audit``: check an archive against keys pinned outside it."""

import json
import sys
from pathlib import Path

import click

from storage.audit import Audit
from storage.committed import reading_keyring
from storage.stores import StorageError
from storage.transparency import log_findings
from .archive_reading import open_location
from .keyrings import build_keyring, keyring_options


@click.command()
@click.argument("archive")
@keyring_options
@click.option("--trust-archive-keys", is_flag=True,
              help="Also trust, for manifests and attestations, the archiver keys the archive publishes "
                   "under keys/. Trust then comes from the archive itself: only for an archive you keep.")
@click.option("--s3-endpoint-url", default=None, help="S3-compatible endpoint (MinIO, Ceph, R2...).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per discrepancy per line, then the summary.")
@click.option("--checkpoint", "checkpoints", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Also check that the archive's log of its key extends this saved checkpoint; repeatable.")
def audit(archive, keyrings, no_default_keys, trust_archive_keys, s3_endpoint_url, as_json, checkpoints):
    """Check that ARCHIVE (a folder or s3://bucket/prefix) holds what it promises.

    Every object of every committed manifest is there with its size and sha256, every
    raw bundle verifies again, manifest and attestation signatures and the attestation
    chains verify, table row counts match the manifests; orphans are listed. Give the
    archive's key with --keyring (its keys/<key_id>.json, once you trust it) beside the
    keys that sign its bundles. One line per discrepancy, then a summary.
    Exit 0 when clean, 1 on any discrepancy, 2 on usage errors.
    """
    bundle_keyring = build_keyring(keyrings, no_default_keys)
    if "://" not in archive and not Path(archive).is_dir():
        raise click.UsageError(f"no archive folder at {archive}")
    store = open_location(archive, s3_endpoint_url)
    try:
        run = Audit(store, bundle_keyring, reading_keyring(store, bundle_keyring, archive_keys=trust_archive_keys))
        for found in run.run():
            click.echo(json.dumps(found.as_dict()) if as_json else found.line())
        for found in log_findings(store, run.archive_keyring, {path: Path(path).read_bytes() for path in checkpoints}):
            run.counts.discrepancies[found.code] += 1
            click.echo(json.dumps(found.as_dict()) if as_json else found.line())
    except StorageError as exc:
        raise click.ClickException(f"audit stopped: {exc}") from None
    counts = run.counts
    if as_json:
        click.echo(json.dumps({"summary": counts.as_dict()}))
    else:
        click.echo(_summary(counts))
    if counts.discrepancies["MANIFEST_INVALID"] and not counts.manifests:
        click.echo("no manifest verifies: pin the archive's key with --keyring (its keys/<key_id>.json, "
                   "once you trust it)", err=True)
    sys.exit(0 if counts.clean else 1)


def _summary(counts) -> str:
    checked = (f"{counts.manifests} manifests, {counts.objects} objects ({counts.bytes} bytes), "
               f"{counts.bundles} bundles, {counts.attestations} attestations")
    if counts.clean:
        return f"clean: {checked}"
    found = ", ".join(f"{code} {n}" for code, n in sorted(counts.discrepancies.items()))
    return f"{sum(counts.discrepancies.values())} discrepancies ({found}) in {checked}"
