"""``python -m pith_testkit``: ``corpus generate`` mints a signed test corpus, ``serve``
runs the mirror with fault injection, over a folder, an archive or a virtual corpus."""

import dataclasses
import functools
import tempfile
from pathlib import Path

import click

from pith.links import REGISTRY_BASE
from pith_archiver.cli import LazyGroup
from pith_archiver.commands.serve import listen_options, open_source
from pith_archiver.exit_status import ConfigError
from pith_archiver.output import log_to_stderr, say, verbosity_options
from pith_archiver.reading.archives import TRUST_HELP, is_archive, trust_options
from storage.serving.resolver import SiteOptions
from storage.serving.source import BUNDLES_DIR, KEYRING_NAME

from .corpus import LINKS, generate_corpus
from .faults import FaultPlan
from .server import FaultyMirrorServer
from .static import export_site
from .virtual import VirtualCorpus
from .weeks import DATES, Weeks

FAULT_FIELDS = [f.name for f in dataclasses.fields(FaultPlan)]


class Share(click.ParamType):
    """A share of the records: ``1%`` or ``0.01``."""

    name = "share"

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"{value!r} is not a share (1% or 0.01)", param, ctx)
        if not 0 <= share <= 1:
            self.fail(f"{value!r} is not between 0% and 100%", param, ctx)
        return share


def week_options(command):
    """The registry week served (pith_testkit.weeks), handed to ``command`` as ``weeks``."""

    @functools.wraps(command)
    def with_weeks(*args, week, changed_per_week, dates, lying_share, **kwargs):
        return command(*args, weeks=Weeks(week, changed_per_week, dates, lying_share), **kwargs)

    for option in reversed(
        [
            click.option(
                "--week",
                type=click.IntRange(0),
                default=0,
                show_default=True,
                help="The registry as it stands at the end of week N: each week, --changed-per-week of the "
                "records gained a version (0: as first built).",
            ),
            click.option(
                "--changed-per-week", type=Share(), default="1%", show_default=True, help="Records changed each week."
            ),
            click.option(
                "--dates",
                type=click.Choice(DATES),
                default="honest",
                show_default=True,
                help="What the sitemaps' <lastmod> and the Change Lists say: the day each version was built, "
                "the date before for --lying-share of the changed records (left out of the Change Lists), "
                "or no date at all.",
            ),
            click.option("--lying-share", type=Share(), default="100%", show_default=True, help="With --dates lying."),
        ]
    ):
        with_weeks = option(with_weeks)
    return with_weeks


@click.group(cls=LazyGroup, lazy_commands={}, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """pith-archiver's test kit: signed test corpora, and a mirror that injects faults.
    An unforeseen error is one line and exit 4, as in pith-archiver."""


@main.group()
def corpus():
    """Test corpora of signed bundles."""


@corpus.command()
@click.option("--records", type=click.IntRange(0), required=True, help="How many bundles to mint.")
@click.option("--out", type=click.Path(file_okay=False), required=True, help="A new or empty directory.")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--base-url",
    default=REGISTRY_BASE,
    show_default=True,
    help="Base of the links and mirror hints written into minted bundles.",
)
@click.option(
    "--links",
    type=click.Choice(LINKS),
    default="bundles",
    show_default=True,
    help="Where records name one another: `bundles` (each names the records it cites and a sample of "
    "those citing it: one request per record from one seed) or `pages` (bundles name no other record, "
    "as the registry's; only the record pages a mirror renders from corpus.json link them: two).",
)
@verbosity_options
def generate(records, out, seed, base_url, links, verbosity):
    """Mint RECORDS bundles in the registry's format, signed by a test key derived from
    SEED, plus the real registry bundles; write DIR/bundles/, DIR/keyring.json (verifies
    them all) and DIR/corpus.json (the index `serve` starts from, with the citation graph)."""
    try:
        catalog = generate_corpus(out, records, seed, base_url, links)
    except FileExistsError as exc:
        raise ConfigError(str(exc)) from None
    say(
        f"wrote {len(catalog)} bundles ({records} minted, {len(catalog) - records} real) to "
        f"{out}/{BUNDLES_DIR}; verify them with --keyring {out}/{KEYRING_NAME}"
    )


@corpus.command()
@click.option("--records", type=click.IntRange(1), required=True, help="How many records the registry holds.")
@click.option("--out", type=click.Path(file_okay=False), required=True, help="Where the site's files go.")
@click.option("--base-url", required=True, help="The URL the static server will serve --out at, for the links.")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same bytes.")
@week_options
@click.option("--resourcesync", is_flag=True, help="Write the registry's ResourceSync documents too.")
@click.option("--sitemap-page-size", type=click.IntRange(1), default=SiteOptions.sitemap_page_size, show_default=True)
@verbosity_options
def week(records, out, base_url, seed, weeks, resourcesync, sitemap_page_size, verbosity):
    """Write week N of a registry that changes (`serve --virtual N --week N` serves the
    same) as plain files for a static server: OUT/site/ (each bundle at
    pith/<SUFFIX>/bundle.json, the sitemaps, with --resourcesync the ResourceSync
    documents; each file's mtime its Last-Modified) and OUT/keyring.json. Written week
    after week into one OUT, files that did not change are left as they were."""
    log_to_stderr(verbosity)
    source = VirtualCorpus(records, seed, base_url, weeks=weeks, resourcesync=resourcesync)
    site = Path(out) / "site"
    written = export_site(source, base_url, site, SiteOptions(sitemap_page_size=sitemap_page_size))
    source.write_keyring(Path(out) / KEYRING_NAME)
    say(f"week {weeks.week} of {records} records: {written} files written to {site}")
    say(f"verify them with --keyring {out}/{KEYRING_NAME}")


@main.command(epilog=TRUST_HELP)
@click.argument("directory", required=False)
@click.option(
    "--virtual",
    type=click.IntRange(1),
    metavar="N",
    help="Serve N records minted on demand from --seed, instead of DIRECTORY (nothing on disk).",
)
@click.option(
    "--keyring-out",
    type=click.Path(dir_okay=False),
    help="With --virtual: write the keyring that verifies its records here [default: a temporary file].",
)
@trust_options
@listen_options
@click.option("--latency-ms", type=click.FloatRange(0), default=0, help="Fault: delay every answer.")
@click.option(
    "--error-rate", type=click.FloatRange(0, 1), default=0.0, help="Fault: share answered with --error-status."
)
@click.option("--error-status", type=click.Choice(["404", "500", "503"]), default="503", show_default=True)
@click.option("--rate-limit-every", type=click.IntRange(0), default=0, help="Fault: every Nth request gets 429.")
@click.option(
    "--retry-after",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Retry-After seconds on 429 and --fail-first 503s.",
)
@click.option("--drop-rate", type=click.FloatRange(0, 1), default=0.0, help="Fault: share of connections dropped.")
@click.option("--truncate-rate", type=click.FloatRange(0, 1), default=0.0, help="Fault: share of bodies cut in half.")
@click.option("--fail-first", type=click.IntRange(0), default=0, help="Fault: first N requests of each path get 503.")
@click.option("--wrong-content-type", is_flag=True, help="Fault: JSON served as text/html.")
@click.option("--tamper", multiple=True, metavar="SUFFIX", help="Fault: corrupt this record's bundle; repeatable.")
@click.option("--redirect-loop", multiple=True, metavar="SUFFIX", help="Fault: this record redirects forever.")
@click.option("--oversize", multiple=True, metavar="SUFFIX", help="Fault: this record's bundle is huge.")
@click.option("--oversize-bytes", type=click.IntRange(1), default=FaultPlan.oversize_bytes, show_default=True)
@click.option("--swap-with", metavar="SUFFIX", help="Hostile: every other record's bundle and state are this record's.")
@click.option("--misresolve", metavar="SUFFIX", help="Hostile: every alias redirects to this record.")
@click.option("--forge", is_flag=True, help="Hostile: every bundle corrupted (it no longer verifies).")
@click.option("--trickle", type=click.FloatRange(0), default=0.0, help="Hostile: seconds between a bundle's bytes.")
@click.option("--fault-paths", "paths", metavar="REGEX", help="Request faults only on paths matching this.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fault rates and of --virtual.")
@week_options
@click.option("--resourcesync", is_flag=True, help="With --virtual: a ResourceSync source too, a Change List a week.")
@verbosity_options
def serve(
    directory,
    virtual,
    keyring_out,
    trust,
    listening,
    weeks,
    resourcesync,
    verbosity,
    **faults,
):
    """Serve DIRECTORY as `pith-archiver serve` does (a corpus, a folder of bundles or an
    archive), or, with --virtual N, the records `corpus generate --seed S` plans, minted
    as they are asked for; injecting the faults asked for. Prints the URL it listens on
    as its first line (then the --virtual keyring's path), then serves until SIGINT or
    SIGTERM. Exit 2 on usage or configuration errors, 4 when the archive cannot be read."""
    log_to_stderr(verbosity)
    faults["error_status"] = int(faults["error_status"])
    try:
        plan = FaultPlan(**{field: faults[field] for field in FAULT_FIELDS if field in faults})
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None
    virtual_only = {
        "--keyring-out": keyring_out,
        "--week and its options": weeks != Weeks(),
        "--resourcesync": resourcesync,
    }
    given = [name for name, value in virtual_only.items() if value]
    if given and not virtual:
        raise ConfigError(f"{' and '.join(given)} {'goes' if len(given) == 1 else 'go'} with --virtual N")
    if virtual:
        source, keyring_path = _virtual(
            VirtualCorpus(virtual, faults["seed"], weeks=weeks, resourcesync=resourcesync), keyring_out, directory
        )
    elif directory:
        source = open_source(directory, _with_corpus_keyring(directory, trust))
        keyring_path = None
    else:
        raise click.UsageError("give DIRECTORY (a corpus, a folder of bundles or an archive) or --virtual N")
    named = {plan.swap_with, plan.misresolve} - {None}
    unknown = (plan.tamper | plan.redirect_loop | plan.oversize | named) - set(source.catalog.suffixes)
    if unknown:
        raise click.UsageError(f"not records of {directory}: {', '.join(sorted(unknown))}")
    listening.serve(source, FaultyMirrorServer, [f"keyring {keyring_path}"] if keyring_path else [], faults=plan)


def _with_corpus_keyring(directory: str, trust):
    """A test corpus is served under the keyring it carries (``corpus generate`` writes
    it beside the bundles), besides the keys trusted anyway."""
    carried = Path(directory) / KEYRING_NAME
    if is_archive(directory) or not carried.is_file():
        return trust
    return dataclasses.replace(trust, keyrings=(*trust.keyrings, str(carried)))


def _virtual(source: VirtualCorpus, keyring_out, directory):
    """The --virtual corpus, and where its keyring was written."""
    if directory:
        raise ConfigError("give DIRECTORY or --virtual N, not both")
    path = keyring_out or str(
        Path(tempfile.gettempdir()) / f"pith-virtual-{len(source.catalog)}-{source.seed}.keyring.json"
    )
    try:
        source.write_keyring(path)
    except OSError as exc:
        raise ConfigError(f"--keyring-out {path}: {exc.strerror}") from None
    return source, path
