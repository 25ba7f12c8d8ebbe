"""``pith-archiver sync PEER``: copy a peer archive through its signed logs (its work
is in ``peer_sync``); it takes only the options a copy uses, each as ``crawl`` has it."""

import sys
from typing import Any

import click

from ..crawl import tuning
from ..crawl.options import crawl_options_named
from ..exit_status import EXIT_STATUS_HELP
from ..output import output_is_a_report, verbosity_options
from ..peers.sync import SyncOptions, sync_from_archive


@click.command(epilog=EXIT_STATUS_HELP)
@click.argument("peer")
@crawl_options_named(
    "archive",
    "s3_endpoint_url",
    "s3_single_writer",
    "keyrings",
    "no_default_keys",
    "signing_key",
    "add_signing_key",
    "commit_every",
    "no_warc",
    "log_origin",
    "worker",
)
@click.option(
    "--witness-policy",
    metavar="FILE",
    help="Copy only what the peer's checkpoints show cosigned by this policy's witnesses, to its quorum.",
)
@verbosity_options
def sync(**given: Any) -> None:
    """Copy the archive PEER through its signed logs into --out, every object verified.

    PEER is a folder, an http(s):// URL of an archive served as static files (`serve
    ARCHIVE` is one), or s3://bucket/prefix; pin its archive key with --keyring (its
    keys/<key_id>.json). A later sync reads only what the peer's logs added since.
    """
    tuning.economise()
    output_is_a_report()  # the summary of a copy made whether or not anyone reads it
    sys.exit(sync_from_archive(SyncOptions(**given)))
