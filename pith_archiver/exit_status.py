"""The exit status contract every command keeps, so a scheduler that reads only the
status knows what happened. When several apply, the first in this order wins:
USAGE, FAILED, REJECTED, PARTIAL, OK (INTERRUPTED or TERMINATED when a signal stopped the
run, unless its commit failed: FAILED)."""

from enum import IntEnum

import click

from pith.printable import printable


class ExitStatus(IntEnum):
    OK = 0  # done: everything asked for was archived / verified / found clean
    REJECTED = 1  # done, but verification rejected something (bundles, feeds, proofs) or audit found discrepancies
    USAGE = 2  # usage or configuration error: nothing was started
    PARTIAL = 3  # done with failures: some records could not be fetched or read, within --max-failures,
    #                  or exchanges missing from the WARC files (the WARC writer stopped)
    FAILED = 4  # the run failed: nothing archived, resolver unreachable, failures past --max-failures,
    #                  records unaccounted for, the store failed or nothing could be committed
    INTERRUPTED = 130  # stopped by Ctrl-C (SIGINT); a crawl committed what was archived: rerun to resume
    TERMINATED = 143  # stopped by SIGTERM (systemctl stop, kill): as INTERRUPTED


EXIT_STATUS_HELP = (
    "Exit status: 0 done; 1 rejected bundles, split views or discrepancies found; 2 usage or "
    "configuration error (nothing started); 3 done with failures (some records not fetched, within "
    "--max-failures, or exchanges missing from the WARC files); 4 failed (nothing archived, resolver "
    "unreachable, too many failures, records unaccounted for, or nothing committed); 130 interrupted "
    "(Ctrl-C), 143 stopped by SIGTERM (rerun the same command to resume)."
)

MEANING = {  # one line each, as the README's table says it (for machines: --notify)
    ExitStatus.OK: "done: everything asked for was archived (or unchanged), verified, or found clean",
    ExitStatus.REJECTED: "done, but rejected bundles, split views, a rejected feed or proof, or audit discrepancies",
    ExitStatus.USAGE: "a usage or configuration error: nothing was started",
    ExitStatus.PARTIAL: (
        "done with failures: some records could not be fetched, within --max-failures, "
        "or exchanges are missing from the WARC files"
    ),
    ExitStatus.FAILED: (
        "failed: nothing archived, resolver unreachable, too many failures, records unaccounted for, "
        "or nothing committed"
    ),
    ExitStatus.INTERRUPTED: "interrupted: what was archived is committed; rerun the same command to resume",
    ExitStatus.TERMINATED: "stopped by SIGTERM: what was archived is committed; rerun the same command to resume",
}

PRECEDENCE = (ExitStatus.USAGE, ExitStatus.FAILED, ExitStatus.REJECTED, ExitStatus.PARTIAL, ExitStatus.OK)


def worst(*statuses: ExitStatus) -> ExitStatus:
    """The status that wins when several apply (see the module docstring)."""
    return min(statuses, key=PRECEDENCE.index, default=ExitStatus.OK)


class OneLineError(click.ClickException):
    """An error that ends a command as one line on stderr, escaped (``pith.printable``):
    its text may quote a server, a file or an archive."""

    def format_message(self) -> str:
        return printable(self.message)


class ConfigError(OneLineError):
    """A setup mistake the user can fix: one line on stderr, exit 2, before any work."""

    exit_code = ExitStatus.USAGE


class RunFailed(OneLineError):
    """The work could not be done (a store or resolver failed under it): one line, exit 4."""

    exit_code = ExitStatus.FAILED
