"""Options that do not apply are refused, never silently ignored: whoever gave
``--with-raw`` to a release, or ``--policy`` without ``--proof``, believes it did
something. One line naming the option and why, exit 2 (a ConfigError)."""

from collections.abc import Iterable

import click
from click.core import ParameterSource

from .exit_status import ConfigError
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
