"""The ``pith-archiver`` command line.

Commands load on demand: ``verify`` must not pay for Scrapy, pyarrow and boto3, which
other commands need. The group lists every command from the map below (with its short
help) without importing any of them.
"""

import importlib
from typing import Any

import click

import pith_archiver

from . import interrupts
from .exit_status import EXIT_STATUS_HELP, ExitStatus
from .output import OutputClosed, echo

COMMANDS = {  # name: ("module:attribute", short help for the group's --help)
    "audit": ("pith_archiver.commands.audit:audit", "Check that an archive holds what it promises."),
    "checkpoint": (
        "pith_archiver.commands.checkpoint:checkpoint",
        "Print the latest signed checkpoint of each archiver key.",
    ),
    "cosign": (
        "pith_archiver.commands.cosign:cosign",
        "Have the archive's logs cosigned by the witnesses of a policy.",
    ),
    "crawl": ("pith_archiver.commands.crawl:crawl", "Crawl a resolver, verify every bundle, archive it."),
    "export": ("pith_archiver.commands.export:export", "Export the committed contents of an archive."),
    "keys": ("pith_archiver.commands.keys:keys", "The archiver's signing keys; pinning a rotated registry key."),
    "prove": ("pith_archiver.commands.prove:prove", "Prove a record's latest storage attestation (inclusion proof)."),
    "serve": ("pith_archiver.commands.serve:serve", "Serve a corpus or an archive in Pith's resolver layout."),
    "sync": ("pith_archiver.commands.sync:sync", "Copy a peer archive through its signed logs."),
    "verify": (
        "pith_archiver.commands.verify:verify",
        "Verify bundles, feeds, releases, WACZ files: files, folders, URLs.",
    ),
    "witness": ("pith_archiver.commands.witness:witness", "Run a C2SP tlog-witness for the logs of a policy."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported only when they run (or are asked for)."""

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy_commands:
            module, attribute = self.lazy_commands[name][0].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        """An error nobody foresaw is still one line and exit 4; -vv shows its traceback.
        SIGINT and SIGTERM end any command, one line and exit 130 or 143 (``interrupts``);
        a closed standard output ends one whose output is its work silently, 141, as SIGPIPE
        ends a Unix tool (a report's command goes on: ``output.output_is_a_report``)."""
        try:
            with interrupts.raising_on_signals():
                return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # and interrupts.Terminated
            status = interrupts.interrupted_status(exc)
            echo(f"{status.name.lower()} (exit {int(status)}): stopped before the command finished", err=True)
            ctx.exit(status)
        except OutputClosed:  # stdout already silenced (output.echo)
            ctx.exit(ExitStatus.OUTPUT_CLOSED)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as exc:
            if ctx.meta.get("pith_verbosity", 0) >= 2:
                raise
            echo(f"Error: {type(exc).__name__}: {exc} (rerun with -vv for the traceback)", err=True)
            ctx.exit(ExitStatus.FAILED)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (
                name,
                self.lazy_commands[name][1] if name in self.lazy_commands else self.commands[name].get_short_help_str(),
            )
            for name in self.list_commands(ctx)
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version, reading the version (an importlib.metadata look-up) only when asked."""
    if value and not ctx.resilient_parsing:
        echo(f"pith-archiver, version {pith_archiver.__version__}")
        ctx.exit()


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_STATUS_HELP,
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
def main() -> None:
    """Crawl, verify, archive and attest Pith open graph bundles."""
