"""``pith-archiver verify``: one line per bundle or feed, in input order, and a closing
count; ``--json`` lines for machines; the exit status of pith_archiver.exit_status.

It imports only the protocol core: start-up is part of verifying a few bundles."""

import json
import sys
from collections.abc import Iterable

import click

from pith.attestation import Chain
from pith.keyring import Keyring
from pith.parse import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, Limits
from pith.reasons import Reason
from pith.verdict import Status
from storage.archive.stores import StoreRefused
from storage.runtime.cores import available_cores

from ..exit_status import ConfigError, ExitStatus, JobFailed, worst
from ..interrupts import interrupted_status
from ..keyrings import build_keyring, keyring_options
from ..option_checks import RenamedFrom, refuse, refuse_endpoint_without_s3
from ..ordered_pool import ordered_map
from ..output import QUIET, VERBOSE, counted, echo, verbosity_options
from ..reading import s3_sources, sources
from ..reading.checking import TargetChecker
from ..reporting.progress import progress
from ..reporting.repeats import Repeats

STATUSES = (Status.VERIFIED, Status.REJECTED, Status.UNREADABLE, Status.SKIPPED)


@click.command()
@keyring_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per document per line.")
@click.option(
    "--max-bytes",
    type=click.IntRange(1),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Reject documents larger than this.",
)
@click.option(
    "--max-nesting",
    cls=RenamedFrom,
    old="--max-depth",  # until the next release: --max-depth counts a crawl's link hops
    type=click.IntRange(2),
    default=DEFAULT_MAX_DEPTH,
    show_default=True,
    help="Reject documents nested deeper than this.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1),
    default=None,
    help="Processes verifying in parallel.  [default: every core this process may use]",
)
@click.option(
    "--proof",
    "proofs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Check an inclusion proof (`pith-archiver prove --json`) offline instead; repeatable.",
)
@click.option(
    "--policy",
    "policy_file",
    help="With --proof: the proofs are tlog-proof files (`prove --format tlog-proof`), checked against this "
    "witness policy's logs and quorum.",
)
@s3_sources.endpoint_option
@verbosity_options
@click.argument("paths", nargs=-1)
def verify(
    keyrings: tuple[str, ...],
    no_default_keys: bool,
    as_json: bool,
    max_bytes: int,
    max_nesting: int,
    jobs: int | None,
    proofs: tuple[str, ...],
    policy_file: str | None,
    s3_endpoint_url: str | None,
    paths: tuple[str, ...],
    verbosity: int,
) -> None:
    """Verify bundles, attestation feeds, releases and WACZ files: files, folders, http(s)
    URLs, or s3:// objects and prefixes.

    A folder stands for every *.json (bundle) and *.jsonl (feed) file below it; what is
    plainly not a bundle (a corpus index, a keyring, a key document, a manifest, a web
    page) is skipped and counted, but a file that claims to be one (*.bundle.json,
    under raw/bundles/ or quarantine/, or declaring bundle_type) and cannot be read as
    one is rejected. A state document (a mirror's state.json) is skipped and counted
    too, once compared with the state of the bundle.json beside it: one that differs
    is rejected (state_mismatch). An archive folder (one holding manifests/) stands for its raw
    bundles and its attestation feeds. An s3://bucket/prefix stands for what lies below
    it as a folder does (an archive's raw bundles and feeds), an s3:// object for itself;
    the bucket is reached as `audit` reaches it (--s3-endpoint-url, the AWS variables).

    A *.jsonl file is a storage attestation feed (an archive's attestations/<run_id>.jsonl):
    every attestation is checked against the keyring (which must pin the archive's key)
    and so is the chain through them; feeds given together must join into one chain per
    key (the first may continue a feed not given).

    A release.json stands for its dataset release: its signature (an archive key), every
    file it lists, and no unlisted file under its data/ and index/ folders. A *.wacz file
    (an `export --format wacz`) stands for its signed datapackage-digest.json, every
    resource, and then each bundle inside (one line each, then the package's).

    With no PATH, verifies the real registry bundles shipped with the tool.

    Trusted: the built-in registry key (unless --no-default-keys), every --keyring file,
    and this machine's archiver key (the one `crawl` signs with), as `audit` trusts them.

    Exit status: 0 all verified; 1 something was rejected; 2 usage or configuration
    error; 3 some could not be read (none rejected); 4 nothing could be read or verified.
    """
    refuse_endpoint_without_s3(s3_endpoint_url, (*paths, *keyrings))
    refuse_inapplicable_options(bool(proofs), bool(policy_file))
    ring = build_keyring(keyrings, no_default_keys, with_machine_key=True, s3_endpoint_url=s3_endpoint_url)
    if proofs:
        if paths:
            raise ConfigError("give --proof FILE or PATHs to verify, not both")
        sys.exit(check_proofs(proofs, policy_file, ring, as_json))
    checker = TargetChecker(ring, Limits(max_bytes=max_bytes, max_depth=max_nesting), s3_endpoint_url)
    targets = expand_targets(paths, s3_endpoint_url)
    sys.exit(verify_documents(checker, targets, jobs or available_cores(), Report(as_json, verbosity)))


def refuse_inapplicable_options(proofs: bool, policy: bool) -> None:
    """Refuse the options that do not apply: --policy without --proof, the documents'
    limits with --proof, and the keyrings with --policy (its own keys are checked)."""
    if not proofs:
        refuse(["policy_file"], "only with --proof FILE (it names the logs and witnesses a tlog-proof answers to)")
    else:
        refuse(["max_bytes", "max_nesting", "jobs"], "for the documents verified, not --proof files")
    if policy:
        refuse(["keyrings", "no_default_keys"], "not with --policy (a tlog-proof is checked against the policy's keys)")


def check_proofs(proofs: tuple[str, ...], policy_file: str | None, ring: Keyring, as_json: bool) -> ExitStatus:
    """Check --proof files offline: tlog-proof files against ``policy_file``'s logs and
    quorum when given, else inclusion proofs against ``ring``."""
    from ..cosigning import read_policy
    from ..reading.proof_files import (  # only proofs need the archive layer
        check_proof_files,
        check_tlog_proof_files,
    )

    if policy_file:
        return check_tlog_proof_files(proofs, read_policy(policy_file), as_json)
    return check_proof_files(proofs, ring, as_json)


def expand_targets(paths: tuple[str, ...], s3_endpoint_url: str | None) -> list[sources.Target]:
    """The documents PATHs stand for (the shipped registry bundles when none is given);
    a source that cannot be read fails the job, one refused is a configuration error."""
    if not paths:
        from .. import FIXTURES  # found on first use (pith.shipped)

        paths = (str(FIXTURES),)
    try:
        targets = sources.expand(paths, s3_endpoint_url)
    except sources.SourceError as exc:
        raise JobFailed(str(exc)) from None
    except StoreRefused as exc:
        raise ConfigError(str(exc)) from None
    if not targets:
        raise ConfigError("no *.json or *.jsonl files found in the given paths")
    return targets


def verify_documents(checker: TargetChecker, targets: list, jobs: int, report: "Report") -> ExitStatus:
    """Check every target on ``jobs`` processes, report each in input order (feeds
    last), and close with the count."""
    try:
        with progress("verifying") as update:
            feeds = []
            for done, record in enumerate(ordered_map(checker, targets, jobs), 1):
                update(done, len(targets))
                if record["source"].endswith(sources.FEED_SUFFIX):
                    feeds.append(record)  # judged once every feed is in: the chains run through them
                    continue
                for inside in record.pop("inside", []):  # a WACZ's bundles, then the package
                    report.add(inside)
                report.add(record)
    except KeyboardInterrupt as exc:  # and SIGTERM (pith_archiver.interrupts)
        report.close()
        status = interrupted_status(exc)
        echo(f"{status.name.lower()}: the count covers what was verified before", err=True)
        return status
    for record in _join_chains(feeds):
        report.add(record)
    return report.close()


def _join_chains(feeds: list[dict]) -> list[dict]:
    """The feed records, those whose chain does not join the others' now rejected."""
    chain = Chain()
    for record in feeds:
        chain.join(record.pop("stretches", []))
    by_source = {record["source"]: record for record in feeds}
    for stretch, why in chain.breaks(rooted=False):
        by_source[stretch.source] = {
            "source": stretch.source,
            "status": Status.REJECTED,
            "reason": Reason.CHAIN_BROKEN,
            "path": f"{stretch.where}.prev_event",
            "detail": why,
        }
    return [by_source[record["source"]] for record in feeds]


def merge_note(inferred_types: Iterable[str], matches: bool) -> str:
    """How a verified bundle's merge stands when some of its event types are new."""
    agrees = "reproduces the signed state" if matches else "differs from the signed state, which is kept"
    return f"merge inferred ({', '.join(inferred_types)}; {agrees})"


class Report:
    """Prints the records as people or machines want them, counts them, and closes
    with the summary and the exit status."""

    def __init__(self, as_json: bool, verbosity: int):
        self.as_json = as_json
        self.verbosity = verbosity
        self.counts = dict.fromkeys(STATUSES, 0)
        self.inferred = 0  # verified with a merge rule only inferred
        self.states = 0  # state documents skipped (state.json): not bundles
        self.states_matched = 0  # of them, those that match the state their bundle carries
        self.repeats = Repeats(every=as_json or verbosity >= VERBOSE)  # rejections alike, told once

    def add(self, record: dict) -> None:
        status, source = record["status"], record["source"]
        feed = source.endswith(sources.FEED_SUFFIX)
        wacz = source.endswith(sources.WACZ_SUFFIX)
        state = record.get("document") == "state"
        label = "feed" if feed else "wacz" if wacz else "state" if state else record.get("pith_number") or "-"
        if state and status == Status.SKIPPED:
            self.states += 1
            self.states_matched += bool(record.get("matches"))
        if status == Status.VERIFIED:
            line = f"VERIFIED    {label}  {source}" + (
                f"  {counted(record['attestations'], 'attestation')}" if feed else ""
            )
            line += f"  {counted(record['bundles'], 'bundle')} inside" if wacz else ""
            if record.get("merge_confirmed") is False:
                self.inferred += 1
                line += f"  {merge_note(record['inferred_types'], record['merge_inferred_match'])}"
        elif status == Status.REJECTED:
            what = f"{record['reason']} at {record['path'] or '<document>'}: {record['detail']}"
            line = f"REJECTED    {label}  {source}  {what}"
            noun = "feed" if feed else "WACZ file" if wacz else "state document" if state else "bundle"
            if not self.repeats.shown(noun if label != "-" else "document", record["reason"], what):
                self.counts[status] += 1
                return
        else:
            line = f"{status.upper():<10}  {source}  {record['detail']}"
        self._emit(record, line)

    def _emit(self, record: dict, line: str) -> None:
        status = record["status"]
        self.counts[status] += 1
        if self.verbosity > QUIET or status in (Status.REJECTED, Status.UNREADABLE):
            echo(json.dumps(record, ensure_ascii=False) if self.as_json else line)

    def close(self) -> ExitStatus:
        counts = self.counts
        for line in [] if self.as_json else self.repeats.lines():
            echo(line)
        inferred = f" ({self.inferred} with a merge rule only inferred)" if self.inferred else ""
        summary = f"{counts[Status.VERIFIED]} verified{inferred}, {counts[Status.REJECTED]} rejected"
        if counts[Status.UNREADABLE]:
            summary += f", {counts[Status.UNREADABLE]} unreadable"
        if counts[Status.SKIPPED]:
            states = (
                f", {self.states} of them state documents: {self.states_matched} match their bundle"
                if self.states
                else ""
            )
            summary += f", {counts[Status.SKIPPED]} skipped (not bundles{states})"
        echo(summary, err=self.as_json)
        return worst(
            ExitStatus.REJECTED if counts[Status.REJECTED] else ExitStatus.OK,
            ExitStatus.PARTIAL if counts[Status.UNREADABLE] else ExitStatus.OK,
            ExitStatus.OK if counts[Status.VERIFIED] or counts[Status.REJECTED] else ExitStatus.FAILED,
        )
