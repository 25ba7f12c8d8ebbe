"""Options that do not apply are refused, never silently ignored: whoever gave
``--with-raw`` to a release, or ``--policy`` without ``--proof``, believes it did
something. One line naming the option and why, exit 2 (a ConfigError). And a renamed
option keeps working for one release, with a one-line notice naming the new name."""

from collections.abc import Iterable, Mapping
from typing import Any

import click
from click.core import ParameterSource

from .exit_status import ConfigError
from .output import echo
from .reading.s3_sources import SCHEME


def given(*names: str) -> list[str]:
    """Of the parameters ``names``, those the command line (or their environment
    variable) set rather than their default, spelled as the user typed them."""
    ctx = click.get_current_context()
    spelled = {param.name: max(param.opts, key=len) for param in ctx.command.params if param.opts}
    return [spelled[name] for name in names if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)]


def refuse(names: Iterable[str], why: str) -> None:
    """A ConfigError, ``--option: why``, when any of ``names`` was given."""
    found = given(*names)
    if found:
        raise ConfigError(f"{' and '.join(found)}: {why}")


def refuse_endpoint_without_s3(s3_endpoint_url: str | None, locations: Iterable[str | None]) -> None:
    """``--s3-endpoint-url`` only reaches s3:// locations: given with none, it is refused."""
    if s3_endpoint_url and not any(location and location.startswith(SCHEME) for location in locations):
        raise ConfigError("--s3-endpoint-url applies to s3:// locations, and none was given")


class RenamedFrom(click.Option):
    """An option renamed so that one word keeps one meaning across commands: its old flag
    (``old``) still works for one release, with a one-line notice naming the new one; the
    help shows only the new."""

    def __init__(self, *args: Any, old: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.old = old

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        parser.add_option(obj=self, opts=[self.old], dest=self._old_dest, action="store", nargs=self.nargs)

    def handle_parse_result(self, ctx: click.Context, opts: Mapping[str, Any], args: list[str]) -> tuple[Any, list]:
        if self._old_dest in opts:
            echo(f"notice: {self.old} is now {self.opts[0]}; the old name goes in the next release", err=True)
            opts = {**opts, self.name or "": opts[self._old_dest]}
        return super().handle_parse_result(ctx, opts, args)

    @property
    def _old_dest(self) -> str:
        return f"{self.name}_as_{self.old.lstrip('-').replace('-', '_')}"
