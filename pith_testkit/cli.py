"""``python -m pith_testkit``: ``corpus generate`` mints a signed test corpus, ``serve``
runs the mirror with fault injection, over a folder, an archive or a virtual corpus."""

import dataclasses
import tempfile
from pathlib import Path

import click

from pith.links import REGISTRY_BASE
from pith_archiver.archive_reading import TRUST_HELP, is_archive, trust_options
from pith_archiver.cli import LazyGroup
from pith_archiver.cmd_serve import listen_options, open_source
from pith_archiver.exit_status import ConfigError
from pith_archiver.output import log_to_stderr, say, verbosity_options
from storage.serving.source import BUNDLES_DIR, KEYRING_NAME

from .corpus import LINKS, generate_corpus
from .faults import FaultPlan
from .server import FaultyMirrorServer
from .virtual import VirtualCorpus

FAULT_FIELDS = [f.name for f in dataclasses.fields(FaultPlan)]


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
@verbosity_options
def serve(
    directory,
    virtual,
    keyring_out,
    trust,
    listening,
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
    if keyring_out and not virtual:
        raise ConfigError("--keyring-out goes with --virtual N")
    if virtual:
        source, keyring_path = _virtual(virtual, faults["seed"], keyring_out, directory)
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


def _virtual(records: int, seed: int, keyring_out, directory):
    """The --virtual corpus, and where its keyring was written."""
    if directory:
        raise ConfigError("give DIRECTORY or --virtual N, not both")
    source = VirtualCorpus(records, seed)
    path = keyring_out or str(Path(tempfile.gettempdir()) / f"pith-virtual-{records}-{seed}.keyring.json")
    try:
        source.write_keyring(path)
    except OSError as exc:
        raise ConfigError(f"--keyring-out {path}: {exc.strerror}") from None
    return source, path
