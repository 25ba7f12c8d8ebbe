"""SIGINT (Ctrl-C) and SIGTERM end every command, whatever it is doing.

Python turns SIGINT into KeyboardInterrupt and dies of SIGTERM without a word, with no
exit status of the contract; and a command slow to unwind (a thread stuck in a network
call keeps the interpreter from exiting) would ignore both. So each command runs with
both raising (SIGTERM as ``Terminated``, a KeyboardInterrupt), which the group turns
into one line and exit 130 or 143; once a signal has been received, another one, or
``UNWIND`` seconds of unwinding, end the process at once. The crawl installs its own
handlers while Scrapy runs (``pith_archiver.crawl.stop``) and hands back to these.
"""

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

from pith.printable import printable

from .exit_status import ExitStatus

UNWIND = 15.0  # seconds a command may take to unwind after a signal before it is ended at once
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: list[int] = []  # the signals this process received, first first


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python raises KeyboardInterrupt for SIGINT, so that code
    unwinding from one unwinds from the other alike."""


def name_of(signum: int) -> str:
    return signal.Signals(signum).name


def status_of(signum: int) -> ExitStatus:
    return ExitStatus.TERMINATED if signum == signal.SIGTERM else ExitStatus.INTERRUPTED


def interrupted_status(exc: KeyboardInterrupt) -> ExitStatus:
    """The exit status of a command a signal stopped, from what the signal raised."""
    return ExitStatus.TERMINATED if isinstance(exc, Terminated) else ExitStatus.INTERRUPTED


@contextmanager
def raising_on_signals() -> Iterator[None]:
    """``raise_on_signals`` for the time of a command, the handlers before it restored
    after unless a signal came (a command run in a test's process leaves the test's
    alone; one unwinding from a signal keeps ours to its end). Only the main thread may
    set handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    raise_on_signals()
    try:
        yield
    finally:
        if not _received:
            for signum, handler in before.items():
                signal.signal(signum, handler)


def raise_on_signals() -> None:
    """From now on SIGINT and SIGTERM raise (a SIGINT ignored when the command started,
    as ``nohup`` and background jobs have it, stays ignored)."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _raise)
    signal.signal(signal.SIGTERM, _raise)


def unwinding(signum: int) -> None:
    """A signal was received and acted on (a crawl stopped on it): the command may
    finish (its summary) for ``UNWIND`` seconds, and another signal ends it at once."""
    _received.append(signum)
    raise_on_signals()
    _unwind_within(UNWIND, signum)


def exit_after(seconds: float, end: Callable[[], object]) -> threading.Timer:
    """Call ``end`` (which exits) in ``seconds`` from a thread of its own, whatever the
    main thread is stuck in; cancel the timer returned to call it off."""
    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


def exit_now(signum: int, why: str) -> NoReturn:
    """End the process now, one line on stderr saying why: no cleanup, no waiting for
    threads. The line is written to the file descriptor, not through Python's streams,
    which the signal may have interrupted in the middle of a write."""
    status = status_of(signum)
    line = printable(f"{status.name.lower()} (exit {int(status)}): {why}; ended at once")
    os.write(2, f"{line}\n".encode("utf-8", "replace"))
    os._exit(status)


def _unwind_within(seconds: float, signum: int) -> None:
    exit_after(seconds, lambda: exit_now(signum, f"still unwinding {seconds:g} s after {name_of(signum)}"))


def _raise(signum: int, _frame: FrameType | None) -> None:
    if _received:  # the first is still unwinding: this one does not wait for it
        exit_now(signum, f"{name_of(signum)} again")
    _received.append(signum)
    _unwind_within(UNWIND, signum)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
