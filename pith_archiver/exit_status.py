"""The exit status contract every command keeps, so a scheduler that reads only the
status knows what happened. When several apply, the first in this order wins:
USAGE, FAILED, REJECTED, PARTIAL, OK (INTERRUPTED or TERMINATED when a signal stopped the
job, unless its commit failed: FAILED; OUTPUT_CLOSED when the reader of its output went
away)."""

from enum import IntEnum

import click

from pith.printable import printable


class ExitStatus(IntEnum):
    """What a command's exit status says; what each means, in words, is ``MEANING``."""

    OK = 0
    REJECTED = 1
    USAGE = 2
    PARTIAL = 3
    FAILED = 4
    INTERRUPTED = 130  # SIGINT (Ctrl-C)
    OUTPUT_CLOSED = 141  # 128 + SIGPIPE, as a shell reports a tool that SIGPIPE ended
    TERMINATED = 143  # SIGTERM (systemctl stop, kill)


# what each status means, one line each: the one table the README's, every command's help
# (EXIT_STATUS_HELP) and a job's summary for machines (--notify, ``JobSummary``) all say
MEANING = {
    ExitStatus.OK: "done: everything asked for was archived (or unchanged), verified, or found clean",
    ExitStatus.REJECTED: (
        "done, but rejected bundles (kept in quarantine/), split views, a rejected feed or proof, "
        "or audit discrepancies"
    ),
    ExitStatus.USAGE: "a usage or configuration error: nothing was started (one line on stderr)",
    ExitStatus.PARTIAL: (
        "done with failures: some records could not be fetched, within --max-failures (default 1% of the "
        "records found), or exchanges are missing from the WARC files"
    ),
    ExitStatus.FAILED: (
        "failed: nothing archived, resolver unreachable, too many failures, records unaccounted for, "
        "nothing committed, or no archive where one was named"
    ),
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C): what was verified is committed; rerun the same command to resume",
    ExitStatus.OUTPUT_CLOSED: (
        "the reader of its output went away (head, after its lines): it stopped there, silently, "
        "as SIGPIPE ends a Unix tool"
    ),
    ExitStatus.TERMINATED: "stopped by SIGTERM, as after Ctrl-C twice: rerun the same command to resume",
}

EXIT_STATUS_HELP = "Exit status: " + "; ".join(f"{int(status)} {text}" for status, text in MEANING.items()) + "."

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


class JobFailed(OneLineError):
    """The job could not do its work (a store or resolver failed under it): one line, exit 4."""

    exit_code = ExitStatus.FAILED
