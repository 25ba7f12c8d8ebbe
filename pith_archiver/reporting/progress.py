"""A live progress display for long commands (``audit``, ``export``): on stderr when
stderr is a terminal and the command is not quiet, nothing otherwise (a pipe, cron,
``-q``), so it never mixes into what scripts read."""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..output import QUIET, current_verbosity


def _nothing(*args: Any, **kwargs: Any) -> None:
    pass


@contextmanager
def progress(description: str) -> Iterator[Callable[..., None]]:
    """Yields ``update(done, total=None, status="")``; ``total`` None for unknown."""
    if current_verbosity() <= QUIET or not sys.stderr.isatty():
        yield _nothing
        return
    from rich.console import Console  # only a terminal needs it
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None, status="")

        def update(done: int, total: int | None = None, status: str = "") -> None:
            bar.update(task, completed=done, total=total, status=status)

        yield update
