"""``pith-archiver export``: an offline dataset from an archive, as a BagIt bag or a
plain Parquet dataset."""

import logging
import sys

import click

from storage.export import ExportError, export_bag, export_dataset
from storage.stores import StorageError
from .archive_reading import TRUST_HELP, archive_options, open_archive, open_location


@click.command(epilog=TRUST_HELP)
@click.argument("archive")
@click.option("--bag", "bag_out", type=click.Path(), help="Write a BagIt bag at this new local path.")
@click.option("--format", "fmt", type=click.Choice(["bag", "parquet"]),
              help="bag (with --bag) or parquet (with --to) [default: from the option given].")
@click.option("--to", "dest", help="Write a plain Parquet dataset to this folder or s3://bucket/prefix.")
@click.option("--with-raw", is_flag=True, help="With --to: copy the raw bundles too (a bag always has them).")
@click.option("--source-organization", help="The bag's Source-Organization (who transfers it).")
@archive_options
@click.option("-v", "--verbose", is_flag=True, help="Log progress to stderr.")
def export(archive, bag_out, fmt, dest, with_raw, source_organization, s3_endpoint_url, keyrings, no_archive_keys,
           verbose):
    """Export the committed contents of ARCHIVE (a folder or s3://bucket/prefix).

    --bag OUT writes a BagIt bag (sha256 and sha512 manifests) whose data/ holds the
    tables, raw bundles, attestations, manifests, keys and a dataset README (schema,
    counts, provenance). --format parquet --to DEST writes the tables and the README
    (and with --with-raw the raw bundles) to a folder or S3 prefix. Only objects listed
    by committed manifests are exported, each checked against its entry; bundles are
    not verified again.
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    fmt = _check_format(fmt, bag_out, dest, with_raw)
    store, keyring = open_archive(archive, s3_endpoint_url, keyrings, no_archive_keys)
    try:
        if fmt == "bag":
            summary = export_bag(store, keyring, bag_out, organization=source_organization)
        else:
            summary = export_dataset(store, keyring, open_location(dest, s3_endpoint_url), with_raw=with_raw)
    except (ExportError, StorageError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"exported {summary.bundle_versions} bundle versions ({summary.objects} files, {summary.bytes} bytes) "
               f"from {archive} to {summary.destination} ({fmt})")


def _check_format(fmt, bag_out, dest, with_raw) -> str:
    """The format asked for, once the options agree with it."""
    if bool(bag_out) == bool(dest):
        raise click.UsageError("give either --bag OUT or --format parquet --to DEST")
    wanted = "bag" if bag_out else "parquet"
    if fmt not in (None, wanted):
        raise click.UsageError(f"--format {fmt} does not go with {'--bag' if bag_out else '--to'}")
    if with_raw and wanted == "bag":
        raise click.UsageError("--with-raw goes with --to: a bag always holds the raw bundles")
    return wanted
