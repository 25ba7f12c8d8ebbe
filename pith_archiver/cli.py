"""The ``pith-archiver`` command line."""

import json
import sys
from functools import partial

import click

from pith.attestation import Chain, check_feed, split_lines
from pith.parse import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, Limits
from pith.reasons import Rejected
from pith.verify import verify_bundle
from . import FIXTURES, __version__, sources
from .cmd_tlog import check_proof_files
from .exit_status import ConfigError
from .keyrings import build_keyring, keyring_options


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
@click.option("--proof", "proofs", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Check an inclusion proof (`pith-archiver prove --json`) offline instead; repeatable.")
@click.argument("paths", nargs=-1)
def verify(keyrings, no_default_keys, as_json, max_bytes, max_depth, proofs, paths):
    """Verify bundles: files, directories (every *.json and *.jsonl below) or http(s) URLs.

    A *.jsonl file is a storage attestation feed (an archive's attestations/<run_id>.jsonl):
    every attestation is checked against the keyring (which must pin the archive's key)
    and so is the chain through them; feeds given together must join into one chain per
    key (the first may continue a feed not given).

    With no PATH, verifies the real registry bundles shipped with the tool.
    Exit 0 when all verified, 1 when any was rejected or unreadable, 2 on usage errors.
    """
    ring = build_keyring(keyrings, no_default_keys)
    if proofs:
        if paths:
            raise ConfigError("give --proof FILE or PATHs to verify, not both")
        sys.exit(check_proof_files(proofs, ring, as_json))
    limits = Limits(max_bytes=max_bytes, max_depth=max_depth)
    targets = sources.expand(paths or [str(FIXTURES)])
    if not targets:
        raise click.UsageError("no *.json or *.jsonl files found in the given paths")
    counts = {"verified": 0, "rejected": 0, "unreadable": 0}
    chain, feeds = Chain(), {}
    for target in targets:
        if target.endswith(".jsonl"):
            feeds[target] = _check_feed(target, ring, chain)
            continue
        try:
            verdict = verify_bundle(sources.read(target, max_bytes), ring, limits)
        except sources.SourceError as exc:
            counts["unreadable"] += 1
            _unreadable(as_json, target, exc)
            continue
        counts[verdict.status] += 1
        if verdict.ok:
            line = f"VERIFIED    {verdict.pith_number}  {target}"
        else:
            line = f"REJECTED    {verdict.pith_number or '-'}  {target}  {verdict.reason} at {verdict.path or '<document>'}: {verdict.detail}"
        _emit(as_json, {"source": target, **verdict.as_dict()}, line)
    for segment, why in chain.breaks(rooted=False):  # the feeds given must join into one chain per key
        feeds[segment.source] = {"source": segment.source, "status": "rejected", "reason": "chain_broken",
                                 "path": f"{segment.where}.prev_event", "detail": why}
    for record in feeds.values():
        counts[record["status"]] += 1
        _emit_feed(as_json, record)
    summary = f"{counts['verified']} verified, {counts['rejected']} rejected"
    if counts["unreadable"]:
        summary += f", {counts['unreadable']} unreadable"
    click.echo(summary, err=as_json)
    sys.exit(0 if counts["rejected"] == counts["unreadable"] == 0 else 1)


def _check_feed(target: str, ring, chain: Chain) -> dict:
    """Check one attestation feed file, streaming: the record ``verify`` reports."""
    try:
        with open(target, "rb") as handle:
            count = check_feed(target, split_lines(iter(partial(handle.read, 1 << 20), b"")), ring, chain)
    except OSError as exc:
        return {"source": target, "status": "unreadable", "detail": str(exc)}
    except Rejected as exc:
        return {"source": target, "status": "rejected", "reason": exc.reason, "path": exc.path, "detail": exc.detail}
    return {"source": target, "status": "verified", "attestations": count}


def _emit_feed(as_json: bool, record: dict) -> None:
    target = record["source"]
    if record["status"] == "unreadable":
        _unreadable(as_json, target, record["detail"])
    elif record["status"] == "rejected":
        _emit(as_json, record, f"REJECTED    feed  {target}  {record['reason']} at "
                               f"{record['path'] or '<document>'}: {record['detail']}")
    else:
        _emit(as_json, record, f"VERIFIED    feed  {target}  {record['attestations']} attestations")


def _unreadable(as_json: bool, target: str, exc) -> None:
    _emit(as_json, {"source": target, "status": "unreadable", "detail": str(exc)}, f"UNREADABLE  {target}  {exc}")


def _emit(as_json: bool, record: dict, line: str) -> None:
    click.echo(json.dumps(record, ensure_ascii=False) if as_json else line)


from .cmd_crawl import crawl  # noqa: E402  (commands register on the group above)

main.add_command(crawl)


from .cmd_mirror import corpus, serve  # noqa: E402  (registered last: the mirror commands live apart)
main.add_command(corpus)
main.add_command(serve)

from .cmd_export import export  # noqa: E402
main.add_command(export)

from .cmd_audit import audit  # noqa: E402
from .cmd_keys import keys  # noqa: E402
main.add_command(audit)
main.add_command(keys)

from .cmd_tlog import checkpoint, prove  # noqa: E402
main.add_command(checkpoint)
main.add_command(prove)
