"""``pith-archiver audit``: check an archive against keys pinned outside it."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import click

from pith.keyring import Keyring
from pith.reasons import Finding
from storage.archive.stores import ObjectStore, StorageError
from storage.audit import SIZE_RULE, Audit, AuditCounts
from storage.log_proofs import log_findings
from storage.repair import Repair

from ..exit_status import EXIT_STATUS_HELP, ExitStatus, JobFailed
from ..output import VERBOSE, counted, echo, log_to_stderr, say, verbosity_options
from ..peers.repair import repair_history, repair_setup, repair_status, show_repair
from ..reading.archives import TRUST_HELP, Trust, archive_pin_hint, open_archive, trust_options
from ..reporting.job_hooks import JobHooks, job_hook_options
from ..reporting.progress import progress
from ..reporting.repeats import Repeats


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
@click.option(
    "--repair-from",
    "repair_from",
    multiple=True,
    metavar="PEER",
    help="Repair each object found missing or damaged from the first of these peers (a folder, http(s):// "
    "or s3://; repeatable) whose copy has the sha256 this archive's manifests list; a peer's log must be "
    "signed by a pinned archive key, as for `sync`. A table file or index no peer has is "
    "rebuilt from the raw objects, a stale published checkpoint published again. Then audit again.",
)
@job_hook_options("audit")
@verbosity_options
def audit(
    archive: str,
    trust: Trust,
    as_json: bool,
    checkpoints: tuple[str, ...],
    repair_from: tuple[str, ...],
    verbosity: int,
    hooks: JobHooks,
) -> None:
    """Check that ARCHIVE (a folder or s3://bucket/prefix) holds what it promises.

    Every object of every committed manifest is there with its size and sha256, every
    raw bundle verifies again (signed by registry keys, within the size rule the crawl
    admits by), manifest and attestation signatures (by archive keys) and the attestation
    chains verify, table row counts match the manifests; every file no manifest lists is
    an orphan, wherever it lies. On the machine that crawled the archive no option is
    needed. One line per discrepancy, then a summary, and the archive's repair history.
    Exit 0 when clean, 1 on any discrepancy, 2 on usage or configuration errors, 4 when
    the store failed mid-way or ARCHIVE holds no archive (an empty folder or prefix is
    never clean). With --repair-from: 0 when all was repaired and the archive then
    audits clean, 1 when something stays damaged (named), 4 when a peer was needed and
    none could be read (a table file or index is rebuilt from the raw objects, a stale
    published checkpoint published again, with no peer).
    """
    log_to_stderr(verbosity)
    store, keyring = open_archive(archive, trust, repair_from)
    setup = repair_setup(repair_from, trust) if repair_from else None
    audit_pass = _audit(archive, store, keyring, as_json, checkpoints, verbosity)
    status = ExitStatus.OK if audit_pass.counts.clean else ExitStatus.REJECTED
    why = _summary(audit_pass.counts)
    if setup is not None:
        repair = Repair(store, setup.signer, setup.peers, setup.peer_keys, keys=keyring)
        report = None if audit_pass.counts.clean else repair.run(audit_pass.damaged, audit_pass.logs())
        if report is not None:
            show_repair(report, as_json)
        if report is not None and report.manifest is not None:
            if not as_json:
                say("audit after the repair:")
            audit_pass = _audit(archive, store, keyring, as_json, checkpoints, verbosity)
        status, why = repair_status(report, audit_pass.counts)
    counts = audit_pass.counts
    hooks.update(archived=counts.bundles, rejected=dict(counts.discrepancies), why=why)
    if setup is not None and not as_json:
        echo(f"{status.name.lower()} (exit {int(status)}): {why}", err=status != ExitStatus.OK)
    sys.exit(status)


def _audit(
    archive: str, store: ObjectStore, keyring: Keyring, as_json: bool, checkpoints: tuple[str, ...], verbosity: int
) -> Audit:
    """One pass over the archive, each discrepancy printed as found, then the summary
    and the repair history."""
    repeats = Repeats(every=as_json or verbosity >= VERBOSE)
    with progress(f"auditing {archive}") as update:

        def checked(counts: AuditCounts) -> None:
            update(counts.objects, status=f"{counts.manifests} manifests, {counts.bytes / 1e6:.1f} MB")

        audit_pass = Audit(store, keyring, keyring, on_object=checked)
        try:
            for found in audit_pass.run():
                if (
                    found.code is Finding.MANIFEST_UNPINNED and found.key_id
                ):  # the fix goes with it, where a scheduler reads
                    found = replace(
                        found, detail=f"{found.detail}; to check them, {archive_pin_hint(archive, found.key_id)}"
                    )
                if found.reason is None or repeats.shown("bundle", found.reason, found.detail):
                    echo(json.dumps(found.as_dict()) if as_json else found.line())
            saved = {path: Path(path).read_bytes() for path in checkpoints}
            for found in log_findings(store, audit_pass.archive_keyring, audit_pass.logs(), saved):
                audit_pass.counts.discrepancies[found.code] += 1
                echo(json.dumps(found.as_dict()) if as_json else found.line())
        except StorageError as exc:
            raise JobFailed(f"audit stopped: {exc}") from None
    counts = audit_pass.counts
    for line in [] if as_json else [*repeats.lines(), *repair_history(audit_pass.repairs)]:
        echo(line)
    echo(json.dumps({"summary": counts.as_dict()}) if as_json else _summary(counts))
    return audit_pass


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
