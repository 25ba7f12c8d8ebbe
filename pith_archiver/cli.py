"""The ``pith-archiver`` command line."""

import json
import sys

import click

from pith.keyring import Keyring, KeyringError
from pith.parse import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, Limits
from pith.verify import verify_bundle
from . import FIXTURES, __version__, sources


def keyring_options(func):
    func = click.option("--no-default-keys", is_flag=True,
                        help="Do not trust the built-in registry key (pith-v1-2026-05).")(func)
    func = click.option("--keyring", "keyrings", multiple=True, type=click.Path(exists=True, dir_okay=False),
                        help='Pin the keys in this JSON file ({"keys": [...]}); repeatable.')(func)
    return func


def build_keyring(keyrings, no_default_keys) -> Keyring:
    try:
        ring = Keyring.build(keyrings, default_keys=not no_default_keys)
    except KeyringError as exc:
        raise click.UsageError(str(exc)) from None
    if not len(ring):
        raise click.UsageError("the keyring is empty: give --keyring FILE or drop --no-default-keys")
    return ring


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pith-archiver")
def main():
    """Crawl, verify, archive and attest Pith open graph bundles."""


@main.command()
@keyring_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per bundle per line.")
@click.option("--max-bytes", type=click.IntRange(1), default=DEFAULT_MAX_BYTES, show_default=True,
              help="Reject documents larger than this.")
@click.option("--max-depth", type=click.IntRange(2), default=DEFAULT_MAX_DEPTH, show_default=True,
              help="Reject documents nested deeper than this.")
@click.argument("paths", nargs=-1)
def verify(keyrings, no_default_keys, as_json, max_bytes, max_depth, paths):
    """Verify bundles: files, directories (every *.json below) or http(s) URLs.

    With no PATH, verifies the real registry bundles shipped with the tool.
    Exit 0 when all verified, 1 when any was rejected or unreadable, 2 on usage errors.
    """
    ring = build_keyring(keyrings, no_default_keys)
    limits = Limits(max_bytes=max_bytes, max_depth=max_depth)
    targets = sources.expand(paths or [str(FIXTURES)])
    if not targets:
        raise click.UsageError("no *.json files found in the given paths")
    counts = {"verified": 0, "rejected": 0, "unreadable": 0}
    for target in targets:
        try:
            verdict = verify_bundle(sources.read(target, max_bytes), ring, limits)
        except sources.SourceError as exc:
            counts["unreadable"] += 1
            _emit(as_json, {"source": target, "status": "unreadable", "detail": str(exc)},
                  f"UNREADABLE  {target}  {exc}")
            continue
        counts[verdict.status] += 1
        if verdict.ok:
            line = f"VERIFIED    {verdict.pith_number}  {target}"
        else:
            line = f"REJECTED    {verdict.pith_number or '-'}  {target}  {verdict.reason} at {verdict.path or '<document>'}: {verdict.detail}"
        _emit(as_json, {"source": target, **verdict.as_dict()}, line)
    summary = f"{counts['verified']} verified, {counts['rejected']} rejected"
    if counts["unreadable"]:
        summary += f", {counts['unreadable']} unreadable"
    click.echo(summary, err=as_json)
    sys.exit(0 if counts["rejected"] == counts["unreadable"] == 0 else 1)


def _emit(as_json: bool, record: dict, line: str) -> None:
    click.echo(json.dumps(record, ensure_ascii=False) if as_json else line)


from .cmd_crawl import crawl  # noqa: E402  (commands register on the group above)

main.add_command(crawl)


from .cmd_mirror import corpus, serve  # noqa: E402  (registered last: the mirror commands live apart)
main.add_command(corpus)
main.add_command(serve)
