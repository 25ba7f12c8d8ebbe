"""How loud a command is: the ``-v``/``-q`` options every command shares.

Quiet prints errors and a one-line summary (for cron); normal prints what a person
follows (a live progress line on a terminal, and the summary); ``-v`` adds the log on
stderr and ``-vv`` debug detail and tracebacks.
"""

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from pith.printable import PrintableLog, printable

QUIET, NORMAL, VERBOSE, DEBUG = -1, 0, 1, 2
Command = Callable[..., Any]  # a click command's function, before and after its options


def counted(count: int, noun: str, nouns: str = "") -> str:
    """``1 bundle``, ``2 bundles``: a count as a person reads it (``nouns``: the plural,
    when it is not ``noun`` and an s)."""
    return f"{count} {noun}" if count == 1 else f"{count} {nouns or noun + 's'}"


def verbosity_options(func: Command) -> Command:
    """Adds ``verbosity`` (QUIET, NORMAL, VERBOSE or DEBUG) to the command's arguments."""
    func = click.option("-q", "--quiet", is_flag=True, help="Print only errors and a one-line summary.")(func)
    func = click.option(
        "-v", "--verbose", count=True, help="More detail on stderr: -v the log, -vv debug and tracebacks."
    )(func)
    return _with_verbosity(func)


def _with_verbosity(func: Command) -> Command:
    @functools.wraps(func)
    def wrapper(*args: Any, verbose: int = 0, quiet: bool = False, **kwargs: Any) -> Any:
        if verbose and quiet:
            raise click.UsageError("-q and -v do not go together")
        level = QUIET if quiet else min(verbose, DEBUG)
        click.get_current_context().find_root().meta["pith_verbosity"] = level
        return func(*args, verbosity=level, **kwargs)

    return wrapper


def current_verbosity() -> int:
    """The verbosity of the command running now (NORMAL outside a command)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if "pith_verbosity" in ctx.meta:
            return ctx.meta["pith_verbosity"]
        ctx = ctx.parent
    return NORMAL


def log_to_stderr(verbosity: int) -> None:
    """Python logging on stderr at the level the verbosity asks for (warnings and up by
    default, errors only when quiet). logging is imported here: ``verify`` never logs."""
    import logging

    level = {QUIET: logging.ERROR, NORMAL: logging.WARNING, VERBOSE: logging.INFO}.get(verbosity, logging.DEBUG)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    escape_logs()


def escape_logs() -> None:
    """Every handler of the root logger (ours, or Scrapy's once it has installed it)
    escapes what it writes (``pith.printable``)."""
    import logging

    for handler in logging.getLogger().handlers:
        if not any(isinstance(existing, PrintableLog) for existing in handler.filters):
            handler.addFilter(PrintableLog())


REPORT_ONLY = "pith_output_is_a_report"  # the root context's meta key ``output_is_a_report`` sets


class OutputClosed(Exception):
    """Whatever read the command's standard output went away (``| head``): nothing more
    can be said there (the command line ends the job, ``ExitStatus.OUTPUT_CLOSED``)."""


def output_is_a_report() -> None:
    """The running command's standard output reports on work that goes on without a
    reader (a crawl, a sync, a server): once its reader has gone its lines are dropped,
    and the job ends with the status of its work. Elsewhere the output is the work
    (``verify``'s verdicts), and a closed one ends the command (OutputClosed)."""
    click.get_current_context().find_root().meta[REPORT_ONLY] = True


def silence_stdout() -> None:
    """Standard output to /dev/null: what is still buffered for a closed pipe goes
    nowhere, not into a second error (at the next line, or as the interpreter flushes
    stdout on its way out)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def echo(message: str = "", err: bool = False, nl: bool = True) -> None:
    """Print as every command does: control characters escaped (``pith.printable``). A
    closed standard output is OutputClosed, unless the command's output is a report
    (``output_is_a_report``); a closed stderr drops the line (there is nowhere left to
    say anything)."""
    try:
        click.echo(printable(message), err=err, nl=nl)
    except BrokenPipeError:
        if err:
            return
        silence_stdout()
        ctx = click.get_current_context(silent=True)
        if ctx is None or not ctx.find_root().meta.get(REPORT_ONLY):
            raise OutputClosed from None


def say(message: str, verbosity_needed: int = NORMAL, err: bool = False) -> None:
    """Print ``message`` unless the command runs quieter than ``verbosity_needed``."""
    if current_verbosity() >= verbosity_needed:
        echo(message, err=err)
