"""``pith-archiver export``: an offline dataset from an archive, as a BagIt bag, a plain
Parquet dataset, a signed dataset release or a WACZ web archive."""

import sys
from dataclasses import dataclass
from typing import NoReturn

import click

from pith.keyring import Keyring
from storage.archive.export_check import BundleRejected
from storage.archive.reader import NothingCommitted, ObjectAltered
from storage.archive.stores import ObjectStore, StorageError
from storage.publishing.export import ExportError, export_bag, export_dataset

from ..crawl.setup import SINGLE_WRITER_HELP, check_store
from ..exit_status import EXIT_STATUS_HELP, ConfigError, ExitStatus, JobFailed
from ..option_checks import RenamedFrom, refuse
from ..output import QUIET, counted, echo, log_to_stderr, say, verbosity_options
from ..reading.archives import TRUST_HELP, Trust, nothing_trusted, open_archive, open_location, trust_options
from ..reporting.job_hooks import JobHooks, job_hook_options
from ..reporting.progress import progress

RAW_IN = {  # why --with-raw does not go with the other formats
    "bag": "a bag always holds the raw bundles",
    "release": "a release holds each record's current version in its tables, and no raw files",
    "wacz": "a WACZ holds the bundles as fetched, in its WARC files",
}


@click.command(epilog=f"{TRUST_HELP}\n\n{EXIT_STATUS_HELP}")
@click.argument("archive")
@click.option(
    "--out",
    "dest",
    cls=RenamedFrom,
    old=("--to", "--bag"),  # until the next release: --out is the destination, as in crawl
    implies={"--bag": ("fmt", "bag")},
    metavar="DEST",
    help="Where the export goes: a bag, a new local path; parquet or release, a new folder or "
    "s3://bucket/prefix; wacz, a file path or s3://bucket/key ending .wacz.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["bag", "parquet", "release", "wacz"]),
    default="parquet",
    show_default=True,
    help="What --out receives.",
)
@click.option(
    "--since",
    metavar="PREVIOUS",
    help="With --format release: only what changed since this earlier release of the archive "
    "(its folder, s3:// prefix or release.json; verified whole first, as `verify` checks it), with "
    "a changes table. With --format wacz: the "
    "WARCs of this run id and the runs after it.",
)
@click.option(
    "--with-raw", is_flag=True, help="With --format parquet: copy the raw bundles too (a bag always has them)."
)
@click.option("--source-organization", help="With --format bag: the bag's Source-Organization (who transfers it).")
@click.option("--s3-single-writer", is_flag=True, help=SINGLE_WRITER_HELP.replace("the crawl", "the export"))
@trust_options
@job_hook_options("export")
@verbosity_options
def export(
    archive: str,
    dest: str | None,
    fmt: str,
    with_raw: bool,
    since: str | None,
    source_organization: str | None,
    s3_single_writer: bool,
    trust: Trust,
    verbosity: int,
    hooks: JobHooks,
) -> None:
    """Export the committed contents of ARCHIVE (a folder or s3://bucket/prefix), in one
    of four formats:

    \b
    bag      --format bag --out OUT: a BagIt bag (sha256 and sha512 bag manifests)
             whose data/ holds the tables, raw bundles, attestations, run manifests,
             keys and a dataset README (schema, counts, provenance).
    parquet  --out DEST: the tables and the README (with --with-raw the raw bundles
             too), in a folder or S3 prefix.
    release  --format release --out DEST: a dataset release of each record's current
             version, signed (release.json), with Croissant, data package and Hugging
             Face cards; --since PREVIOUS: only what changed since that release.
    wacz     --format wacz --out FILE.wacz: the crawl's WARC files as one WACZ web
             archive (pywb, ReplayWeb.page), its digest signed; --since RUN_ID: the
             WARCs of that run and the runs after it.

    Only objects listed by committed manifests are exported, each checked against its
    entry. Whatever the format, every bundle the export includes is verified again
    under the trusted keys before anything is written: one that does not verify stops
    the export, with nothing written (exit 1). `verify` checks a release.json or a
    .wacz again, anywhere. Exit 2 on usage or configuration errors (an option that does
    not go with the format among them), 4 when a store fails or ARCHIVE holds no archive.
    """
    log_to_stderr(verbosity)
    target = _checked_destination(fmt, dest)
    if s3_single_writer and not target.startswith("s3://"):
        raise ConfigError("--s3-single-writer applies to an s3:// --out, and none was given")
    store, keyring = open_archive(archive, trust, elsewhere=(dest, since))
    writer = Writer(trust.s3_endpoint_url, s3_single_writer)
    if fmt == "wacz":
        return _wacz(archive, store, keyring, target, since, trust, writer, hooks)
    if fmt == "release":
        return _release(archive, store, keyring, target, since, trust, writer, hooks)
    try:
        with progress(f"exporting {archive}") as update:
            if fmt == "bag":
                summary = export_bag(store, keyring, target, organization=source_organization, on_object=update)
            else:
                summary = export_dataset(store, keyring, writer.open(target), with_raw=with_raw, on_object=update)
    except Exception as exc:
        _fail(archive, exc, usage=ExportError)
    hooks.update(archived=summary.bundle_versions, why=f"exported to {summary.destination}")
    say(
        f"exported {counted(summary.bundle_versions, 'bundle version')} "
        f"({counted(summary.objects, 'file')}, {summary.bytes} bytes) from {archive} to {summary.destination} ({fmt})",
        QUIET,
    )


def _fail(archive: str, exc: Exception, usage: type[Exception]) -> NoReturn:
    """An export that could not be done, as one line and the documented exit status;
    ``usage``: the exporter's own error for what the user asked."""
    if isinstance(exc, NothingCommitted):
        raise nothing_trusted(archive, exc) from None
    if isinstance(exc, (BundleRejected, ObjectAltered)):  # the archive breaks its own promise: audit it
        echo(f"Error: {exc}", err=True)
        sys.exit(ExitStatus.REJECTED)
    if isinstance(exc, usage):
        raise ConfigError(str(exc)) from None
    if isinstance(exc, StorageError):
        raise JobFailed(str(exc)) from None
    raise exc


def _release(
    archive: str,
    store: ObjectStore,
    keyring: Keyring,
    dest: str,
    since: str | None,
    trust: Trust,
    writer: "Writer",
    hooks: JobHooks,
) -> None:
    """``--format release``: the archive's current snapshot (or what changed ``since``)."""
    from storage.archive.reader import CommittedArchive
    from storage.archive.signing_key import load_or_create
    from storage.publishing.release import SCHEMAS, ReleaseError, read_previous, write_release
    from storage.publishing.release_card import write_cards

    target = writer.open(dest)
    try:
        previous = None
        if since:
            location = since[: -len("release.json")] if since.endswith("release.json") else since
            previous = read_previous(
                open_location(location.rstrip("/") or ".", trust.s3_endpoint_url),
                CommittedArchive.read(store, keyring),
                keyring,
            )
        if any(stored.path == "release.json" for stored in target.list("release.json")):
            raise ConfigError(f"{dest} holds a release already: give an empty destination")
        release = write_release(
            store,
            keyring,
            load_or_create(trust.signing_key),
            target,
            previous=previous,
            describe=lambda made, folder: write_cards(made, folder, {t: SCHEMAS[t] for t in made["tables"]}),
        )
    except Exception as exc:
        _fail(archive, exc, usage=ReleaseError)
    records = release["tables"]["records"]["rows"]
    hooks.update(archived=records, why=f"released {release['release_id']} to {dest}")
    say(
        f"released {release['release_id']} to {dest}: {counted(records, 'record')}"
        + (f" added or changed since {release['since']}" if release["since"] else "")
        + f", {counted(len(release['files']), 'file')}",
        QUIET,
    )


def _wacz(
    archive: str,
    store: ObjectStore,
    keyring: Keyring,
    dest: str,
    since: str | None,
    trust: Trust,
    writer: "Writer",
    hooks: JobHooks,
) -> None:
    """``--format wacz``: the committed WARCs as one WACZ file (``--out`` a local path or s3://bucket/key)."""
    from storage.archive.signing_key import load_or_create
    from storage.capture.wacz import WaczError, write_wacz

    folder, _, name = dest.rstrip("/").rpartition("/")
    if not name.endswith(".wacz"):
        raise ConfigError(f"--out {dest}: a WACZ file's name ends with .wacz")
    target = writer.open(folder or ".")
    if any(stored.path == name for stored in target.list(name)):
        raise ConfigError(f"--out {dest}: exists already")
    try:
        summary = write_wacz(store, keyring, load_or_create(trust.signing_key), target, name, since=since)
    except Exception as exc:
        _fail(archive, exc, usage=WaczError)
    hooks.update(archived=summary.bundles, why=f"exported to {summary.destination}")
    say(
        f"exported {counted(summary.warcs, 'WARC file')} ({counted(summary.bundles, 'bundle')} inside, "
        f"{counted(summary.pages, 'page')}, "
        f"{summary.bytes} bytes) from {archive} to {summary.destination} (wacz)",
        QUIET,
    )


@dataclass(frozen=True)
class Writer:
    """How the export opens where it writes: an S3 destination probed as a crawl's
    archive is (its conditional writes; ``--s3-single-writer``), a folder as it is."""

    s3_endpoint_url: str | None
    single_writer: bool

    def open(self, dest: str) -> ObjectStore:
        if dest.startswith("s3://"):
            return check_store(dest, self.s3_endpoint_url, self.single_writer, option="--out")
        return open_location(dest, self.s3_endpoint_url)


def _checked_destination(fmt: str, dest: str | None) -> str:
    """Where the export goes, once the options agree with the format."""
    if dest is None:
        raise ConfigError("give --out DEST (and --format bag, release or wacz for other than parquet)")
    if fmt == "bag" and dest.startswith("s3://"):
        raise ConfigError(f"--out {dest}: a bag is written at a new local path")
    if fmt not in ("release", "wacz"):
        refuse(["since"], "only with --format release (a previous release) or wacz (a run id)")
    if fmt != "parquet":
        refuse(["with_raw"], f"only with --format parquet ({RAW_IN[fmt]})")
    if fmt != "bag":
        refuse(["source_organization"], "only with --format bag (a field of the bag's bag-info.txt)")
    return dest
