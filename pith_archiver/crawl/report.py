"""What a finished crawl tells its user: the closing summary and the exit status.

Both come from the crawl's Scrapy stats alone, so ``crawl``, the embedded demo and a
scheduler reading ``--stats-json`` agree on what happened.
"""

import re
from dataclasses import dataclass
from typing import Any

import click

from crawler.stat_keys import CrawlStats, Stat

from ..exit_status import ExitStatus, worst
from ..output import NORMAL, QUIET, counted, echo
from .notes import cache_note, future_line, quiet_dates, reason_counts, registry_changes, summary_notes

INTERRUPTED_REASONS = ("shutdown",)  # Scrapy's reason for SIGINT / SIGTERM
STOPPED = (ExitStatus.INTERRUPTED, ExitStatus.TERMINATED)


class FailureBudget(click.ParamType):
    """``--max-failures``: a count (``25``) or a share of the records found (``1%``)."""

    name = "N or P%"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[float, bool]:
        if isinstance(value, tuple):
            return value
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*", str(value))
        if not match or (not match[2] and "." in match[1]):
            self.fail(f"{value!r} is neither a count (25) nor a share of the records (1%)", param, ctx)
        return (float(match[1]), bool(match[2]))


def allowed_failures(budget: tuple[float, bool], records: int) -> float:
    amount, is_share = budget
    return amount * records / 100 if is_share else amount


@dataclass
class CrawlOutcome:
    status: ExitStatus
    why: str  # one line: what the status means for this crawl
    failures: dict  # reason -> count
    rejections: dict  # reason -> count


def outcome(crawl: CrawlStats, budget: tuple[float, bool], shared: bool = False) -> CrawlOutcome:
    """The exit status of a crawl (see pith_archiver.exit_status) and why. A worker of
    a ``shared`` crawl may rightly find that the others left it nothing to fetch."""
    failures, rejections, failed = crawl.failures, crawl.rejections, crawl.failed
    statuses, whys = [], []
    stopped, failed_commit = stop_status(crawl), commit_failure(crawl)
    if stopped is not None and failed_commit:  # never "what was archived is committed"
        return CrawlOutcome(ExitStatus.FAILED, f"stopped, and {failed_commit}", failures, rejections)
    if stopped is not None:
        return CrawlOutcome(stopped, f"stopped by {crawl.stopped_by or 'a signal'}", failures, rejections)
    if crawl.frontier_lost:  # stopped before the crawl was done, whatever it reached
        statuses.append(ExitStatus.FAILED)
        whys.append(f"the frontier was {crawl.frontier_lost}: stopped early; rerun once Redis is back")
    elif not crawl.reached and not failed and shared:
        return CrawlOutcome(ExitStatus.OK, "the other workers had every record", failures, rejections)
    elif not crawl.reached and not failed and crawl.records_taken_before:
        return CrawlOutcome(ExitStatus.OK, "the resumed job had nothing left to fetch", failures, rejections)
    if not crawl.reached:
        statuses.append(ExitStatus.FAILED)
        whys.append(nothing_fetched(crawl))
    elif failed_commit:
        statuses.append(ExitStatus.FAILED)
        whys.append(failed_commit)
    elif failed > allowed_failures(budget, max(crawl.records_found, 1)):
        statuses.append(ExitStatus.FAILED)
        whys.append(f"{counted(failed, 'fetch failure')}, more than --max-failures allows")
    elif failed:
        statuses.append(ExitStatus.PARTIAL)
        whys.append(f"{counted(failed, 'fetch failure')} (within --max-failures): rerun to fetch them")
    if crawl.unaccounted:
        statuses.append(ExitStatus.FAILED)
        whys.append(f"records unaccounted for: {crawl.unaccounted} (named in the log)")
    if crawl.warc_not_recorded and crawl.reached:
        statuses.append(ExitStatus.PARTIAL)
        whys.append(warc_loss(crawl))
    if crawl.rejected:
        statuses.append(ExitStatus.REJECTED)
        whys.append(f"{counted(crawl.rejected, 'bundle')} rejected by verification (kept in quarantine/)")
    if crawl.equivocations:
        statuses.append(ExitStatus.REJECTED)
        whys.append(
            f"{counted(crawl.equivocations, 'split view')}: resolvers served forked histories of a record "
            "(both copies kept, flagged equivocation in verifications)"
        )
    status = worst(*statuses)
    return CrawlOutcome(status, "; ".join(whys) or "done", failures, rejections)


def nothing_fetched(crawl: CrawlStats) -> str:
    """Why a crawl reached no bundle: each source it could not reach, with the cause."""
    if crawl.unreachable:
        return f"no bundle could be fetched, nothing committed: could not reach {unreachable(crawl)}"
    if crawl.failed or not crawl.records_found:
        return "no bundle could be fetched, nothing committed: is the resolver reachable?"
    return "no bundle was fetched, nothing committed"


def unreachable(crawl: CrawlStats) -> str:
    """``host:port (cause)`` of each source a download failed at, after its retries."""
    return ", ".join(f"{host} ({cause})" for host, cause in sorted(crawl.unreachable.items()))


def stop_status(crawl: CrawlStats) -> ExitStatus | None:
    """130, or 143 for SIGTERM, when a signal stopped the crawl (``crawl_stop``; for
    ``scrapy crawl``, Scrapy's own ``shutdown``); None when it was not stopped."""
    if crawl.stopped_by == "SIGTERM":
        return ExitStatus.TERMINATED
    if crawl.stopped_by or crawl.finish_reason in INTERRUPTED_REASONS:
        return ExitStatus.INTERRUPTED
    return None


def commit_failure(crawl: CrawlStats) -> str:
    """Why the final commit failed and what that lost; "" when it did not (or a crawl
    that reached no bundle had nothing to commit)."""
    if not crawl.reached or (crawl.manifest and not crawl.commit_error):
        return ""
    lost = f": {counted(crawl.uncommitted, 'bundle')} archived new left uncommitted" if crawl.uncommitted else ""
    kept = f" ({counted(crawl.interim_commits, 'interim commit')} before)" if crawl.interim_commits else ""
    return f"the final commit failed: {crawl.commit_error or 'the run did not finish'}{lost}{kept}"


def archived(crawl: CrawlStats) -> str:
    """The bundles archived new, counting only those a commit holds."""
    lost = f" ({crawl.uncommitted} more not committed)" if crawl.uncommitted else ""
    return f"archived {crawl.committed} new{lost}"


def accounting(crawl: CrawlStats, stopped: bool) -> str:
    """What became of every record found, in parts that add up to the records found:
    archived new, unchanged (304, or already archived), rejected, failed; and, when
    there were any, those robots.txt forbids, those unaccounted for, and those a stop
    left unfetched."""
    parts = [archived(crawl), f"{crawl.unchanged} unchanged", f"{crawl.rejected} rejected", f"{crawl.failed} failed"]
    if crawl.forbidden:
        parts.append(f"{crawl.forbidden} forbidden by robots.txt")
    if crawl.unaccounted:
        parts.append(f"{crawl.unaccounted} unaccounted for")
    settled = crawl.archived + crawl.unchanged + crawl.rejected + crawl.failed + crawl.forbidden + crawl.unaccounted
    if stopped and crawl.records_found > settled:
        parts.append(f"{crawl.records_found - settled} not fetched (stopped)")
    return ", ".join(parts)


def warc_loss(crawl: CrawlStats) -> str:
    """What the WARC files lack: WARC recording is on by default, so a loss is a failure."""
    lost = f"{counted(crawl.warc_not_recorded, 'exchange')} not recorded"
    return f"WARC writer stopped: {lost} ({crawl.warc_stopped})" if crawl.warc_stopped else f"WARC: {lost}"


def quiet_notes(stats: dict, status: ExitStatus, resume: str) -> str:
    """What the quiet summary adds after the counts, each note short; the resume
    command last, so that the line ends with it."""
    crawl = CrawlStats.of(stats)
    notes = []
    changes = [change.split(":", 1)[0] for change in registry_changes(stats)]
    if changes:
        notes.append("registry changed: " + ", ".join(changes))
    if cache_note(stats):
        notes.append(cache_note(stats))
    if quiet_dates(stats):
        notes.append(quiet_dates(stats))
    if future_line(stats):
        notes.append(f"{counted(stats[Stat.FUTURE_DATES], 'date')} in the future counted as none")
    if crawl.unreachable and not crawl.reached:
        notes.append(f"could not reach {unreachable(crawl)}")
    if crawl.warc_not_recorded:
        notes.append(warc_loss(crawl))
    if status in STOPPED and resume:
        notes.append(f"resume with: {resume}")
    return "".join(f"; {note}" for note in notes)


def report(
    stats: dict,
    archive: str,
    budget: tuple[float, bool],
    verbosity: int = NORMAL,
    log_file: str | None = None,
    resume: str = "",
    shared: bool = False,
) -> ExitStatus:
    """Print the closing summary (one line when quiet) and return the exit status."""
    crawl = CrawlStats.of(stats)
    result = outcome(crawl, budget, shared)
    per_record = f" ({crawl.requests / crawl.reached:.2f} per record)" if crawl.reached else ""
    records = accounting(crawl, result.status in STOPPED)
    line = (
        f"{result.status.name.lower()} (exit {int(result.status)}): {records}, "
        f"of {crawl.records_found} found; {counted(crawl.requests, 'request')}{per_record}"
    )
    if crawl.equivocations:
        line += f", {counted(crawl.equivocations, 'split view')}"
    if verbosity <= QUIET:
        echo(line + quiet_notes(stats, result.status, resume), err=result.status != ExitStatus.OK)
        return result.status
    echo_counts(crawl, result, records, per_record)
    for note in summary_notes(stats):
        echo(note)
    committed = commit_line(crawl, archive)
    if committed:
        echo(committed)
    if log_file:
        echo(f"log: {log_file}")
    why = closing_why(crawl, result, resume)
    echo(f"{result.status.name.lower()} (exit {int(result.status)}): {why}", err=result.status != ExitStatus.OK)
    return result.status


def echo_counts(crawl: CrawlStats, result: CrawlOutcome, records: str, per_record: str) -> None:
    """The full summary's counts: records, bundles, requests, why fetches failed and
    bundles were rejected, and the cross-check of copies from other sources."""
    echo(f"\nrecords found {crawl.records_found}: {records}")
    echo(
        f"bundles fetched {crawl.bundles_fetched}, verified {crawl.verified}, not modified (304) "
        f"{crawl.not_modified}, state mismatches {crawl.state_mismatch}"
    )
    echo(f"requests {crawl.requests}{per_record}, retried {crawl.retries}, download errors {crawl.download_errors}")
    if result.failures:
        echo("fetch failures: " + reason_counts(result.failures))
    if result.rejections:
        echo("rejections: " + reason_counts(result.rejections))
    if crawl.cross_check_records:
        relations = crawl.cross_check
        echo(
            f"cross-check: {crawl.cross_check_records} records, {crawl.cross_check_copies} copies from "
            f"other sources ({crawl.cross_check_failures} failed): same {relations.get('same', 0)}, "
            f"extends {relations.get('extends', 0)}, split views {crawl.equivocations}"
        )


def commit_line(crawl: CrawlStats, archive: str) -> str:
    """The manifest the crawl committed, with its interim commits ("" when none)."""
    manifest, interim = crawl.manifest, crawl.interim_commits
    if manifest and not crawl.commit_error:
        return f"committed {archive}/{manifest}" + (
            f" (and {counted(interim, 'interim commit')} before)" if interim else ""
        )
    if interim:
        return f"{counted(interim, 'interim commit')}, the last {archive}/{manifest}"
    return ""


def closing_why(crawl: CrawlStats, result: CrawlOutcome, resume: str) -> str:
    """The closing line's why: for a stopped crawl, also what was dropped, what was
    kept, and how to resume."""
    if result.status not in STOPPED:
        return result.why
    dropped = f"{counted(crawl.requests_dropped, 'request')} in flight dropped; " if crawl.requests_dropped else ""
    kept = "what was archived is committed" if crawl.reached else "nothing was fetched"
    return f"{result.why}; {dropped}{kept}" + (f"; resume with: {resume}" if resume else "")
