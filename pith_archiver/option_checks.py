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
    """An option renamed so that one word keeps one meaning across commands: each old
    flag (``old``: one, or several) still works for one release, with a one-line notice
    naming the new one; the help shows only the new. An old flag that also chose another
    option's value names it in ``implies`` (``export --bag OUT`` is ``--out OUT --format
    bag``: ``{"--bag": ("fmt", "bag")}``); that option given otherwise is refused."""

    def __init__(
        self,
        *args: Any,
        old: str | tuple[str, ...],
        implies: Mapping[str, tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.olds = (old,) if isinstance(old, str) else old
        self.implies = dict(implies or {})

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for old in self.olds:
            parser.add_option(obj=self, opts=[old], dest=self._dest_of(old), action="store", nargs=self.nargs)

    def handle_parse_result(self, ctx: click.Context, opts: Mapping[str, Any], args: list[str]) -> tuple[Any, list]:
        spelled = [old for old in self.olds if self._dest_of(old) in opts]
        if spelled and (self.name in opts or len(spelled) > 1):
            twice = [self.opts[0], *spelled] if self.name in opts else spelled
            raise ConfigError(f"{' and '.join(twice)}: one option, give it once")
        for old in spelled:
            now = " ".join([self.opts[0], *self._imply(ctx, opts, old)])
            echo(f"notice: {old} is now {now}; the old name goes in the next release", err=True)
            opts = {**opts, self.name or "": opts[self._dest_of(old)]}
        return super().handle_parse_result(ctx, opts, args)

    def _imply(self, ctx: click.Context, opts: Mapping[str, Any], old: str) -> list[str]:
        """The other option ``old`` chose, as its default for this command line (refused
        when given otherwise), spelled for the notice."""
        if old not in self.implies:
            return []
        name, value = self.implies[old]
        flag = next(param.opts[0] for param in ctx.command.params if param.name == name)
        if opts.get(name, value) != value:
            raise ConfigError(f"{flag} {opts[name]} does not go with {old}")
        ctx.default_map = {**(ctx.default_map or {}), name: value}
        return [flag, value]

    def _dest_of(self, old: str) -> str:
        return f"{self.name}_as_{old.lstrip('-').replace('-', '_')}"
