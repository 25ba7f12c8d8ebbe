"""``pith-archiver audit``: check an archive against keys pinned outside it."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import click

from pith.reasons import Finding
from storage.archive.stores import StorageError
from storage.audit import SIZE_RULE, Audit, AuditCounts
from storage.log_proofs import log_findings

from .archive_reading import TRUST_HELP, Trust, archive_pin_hint, open_archive, trust_options
from .exit_status import EXIT_STATUS_HELP, ExitStatus, RunFailed
from .output import VERBOSE, counted, echo, log_to_stderr, verbosity_options
from .progress import progress
from .repeats import Repeats
from .run_hooks import RunHooks, run_hook_options


@click.command(epilog=f"{TRUST_HELP}\n\n{EXIT_STATUS_HELP}")
@click.argument("archive")
@trust_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per discrepancy per line, then the summary.")
@click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Also check that the archive's log of its key extends this saved checkpoint (a rollback or a "
    "fork behind it is a discrepancy); repeatable.",
)
@run_hook_options("audit")
@verbosity_options
def audit(
    archive: str,
    trust: Trust,
    as_json: bool,
    checkpoints: tuple[str, ...],
    verbosity: int,
    hooks: RunHooks,
) -> None:
    """Check that ARCHIVE (a folder or s3://bucket/prefix) holds what it promises.

    Every object of every committed manifest is there with its size and sha256, every
    raw bundle verifies again (signed by registry keys, within the size rule the crawl
    admits by), manifest and attestation signatures (by archive keys) and the attestation
    chains verify, table row counts match the manifests; every file no manifest lists is
    an orphan, wherever it lies. On the machine that crawled the archive no option is
    needed. One line per discrepancy, then a summary. Exit 0 when clean, 1 on any
    discrepancy, 2 on usage or configuration errors, 4 when the store failed mid-way
    or ARCHIVE holds no archive (an empty folder or prefix is never clean).
    """
    log_to_stderr(verbosity)
    store, keyring = open_archive(archive, trust)
    repeats = Repeats(every=as_json or verbosity >= VERBOSE)
    with progress(f"auditing {archive}") as update:

        def checked(counts: AuditCounts) -> None:
            update(counts.objects, status=f"{counts.manifests} manifests, {counts.bytes / 1e6:.1f} MB")

        run = Audit(store, keyring, keyring, on_object=checked)
        try:
            for found in run.run():
                if (
                    found.code is Finding.MANIFEST_UNPINNED and found.key_id
                ):  # the fix goes with it, where a scheduler reads
                    found = replace(
                        found, detail=f"{found.detail}; to check them, {archive_pin_hint(archive, found.key_id)}"
                    )
                if found.reason is None or repeats.shown("bundle", found.reason, found.detail):
                    echo(json.dumps(found.as_dict()) if as_json else found.line())
            saved = {path: Path(path).read_bytes() for path in checkpoints}
            for found in log_findings(store, run.archive_keyring, run.logs(), saved):
                run.counts.discrepancies[found.code] += 1
                echo(json.dumps(found.as_dict()) if as_json else found.line())
        except StorageError as exc:
            raise RunFailed(f"audit stopped: {exc}") from None
    counts = run.counts
    for line in [] if as_json else repeats.lines():
        echo(line)
    hooks.update(archived=counts.bundles, rejected=dict(counts.discrepancies), why=_summary(counts))
    echo(json.dumps({"summary": counts.as_dict()}) if as_json else _summary(counts))
    sys.exit(ExitStatus.OK if counts.clean else ExitStatus.REJECTED)


def _summary(counts: AuditCounts) -> str:
    checked = (
        f"{counted(counts.manifests, 'manifest')}, {counted(counts.objects, 'object')} ({counts.bytes} bytes), "
        f"{counted(counts.bundles, 'bundle')}"
        + (f" ({counts.merge_inferred} with a merge rule only inferred)" if counts.merge_inferred else "")
        + f", {counted(counts.attestations, 'attestation')} "
        f"(bundle size limit {SIZE_RULE['max_bytes']} bytes)"
    )
    if counts.clean:
        return f"clean: {checked}"
    found = ", ".join(f"{code} {n}" for code, n in sorted(counts.discrepancies.items()))
    return f"{counted(sum(counts.discrepancies.values()), 'discrepancy', 'discrepancies')} ({found}) in {checked}"
