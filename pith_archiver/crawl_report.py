"""What a finished crawl tells its user: the closing summary and the exit status.

Both come from the crawl's Scrapy stats alone, so ``crawl``, the embedded demo and a
scheduler reading ``--stats-json`` agree on what happened.
"""

import re
from dataclasses import dataclass

import click

from crawler.signals import CACHE_DROPPED
from crawler.spread import BAD, HOSTS
from .exit_status import ExitStatus, worst
from .output import NORMAL, QUIET

# records that could not be had after retries and mirror fallbacks, by reason
FAILURE_PREFIXES = ("pith/bundle_failures/", "pith/discovery_failures/")
FAILURE_KEYS = ("pith/seeds_unresolved", "pith/page_failures")
INTERRUPTED_REASONS = ("shutdown",)  # Scrapy's reason for SIGINT / SIGTERM


class FailureBudget(click.ParamType):
    """``--max-failures``: a count (``25``) or a share of the records found (``1%``)."""

    name = "N or P%"

    def convert(self, value, param, ctx):
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
    why: str  # one line: what the status means for this run
    failures: dict  # reason -> count
    rejections: dict  # reason -> count


def failures_of(stats: dict) -> dict[str, int]:
    found = {}
    for key, value in stats.items():
        if key.startswith(FAILURE_PREFIXES):
            found[key.split("/", 2)[2]] = found.get(key.split("/", 2)[2], 0) + value
        elif key in FAILURE_KEYS:
            found[key.split("/", 1)[1]] = value
    return {reason: count for reason, count in found.items() if count}


def outcome(stats: dict, budget: tuple[float, bool], shared: bool = False) -> CrawlOutcome:
    """The exit status of a crawl (see pith_archiver.exit_status) and why. A worker of
    a ``shared`` crawl may rightly find that the others left it nothing to fetch."""
    get = lambda key: stats.get(f"pith/{key}", 0)  # noqa: E731
    failures, rejections = (
        failures_of(stats),
        {key.split("/", 2)[2]: value for key, value in stats.items() if key.startswith("pith/rejected/")},
    )
    failed, reached = sum(failures.values()), get("bundles_fetched") + get("not_modified")
    statuses, whys = [], []
    if stats.get("finish_reason") in INTERRUPTED_REASONS:
        return CrawlOutcome(ExitStatus.INTERRUPTED, "interrupted", failures, rejections)
    lost = stats.get("pith/frontier_lost")
    if lost:  # stopped before the crawl was done, whatever it reached
        statuses.append(ExitStatus.FAILED)
        whys.append(f"the frontier was {lost}: stopped early; rerun once Redis is back")
    elif not reached and not failed and shared:
        return CrawlOutcome(ExitStatus.OK, "the other workers had every record", failures, rejections)
    elif not reached and not failed and get("records_taken_before"):
        return CrawlOutcome(ExitStatus.OK, "the resumed job had nothing left to fetch", failures, rejections)
    if not reached:
        statuses.append(ExitStatus.FAILED)
        whys.append(
            "no bundle could be fetched, nothing committed: is the resolver reachable?"
            if failed or not get("records_found")
            else "no bundle was fetched, nothing committed"
        )
    elif stats.get("pith/commit_error") or not stats.get("pith/manifest"):
        statuses.append(ExitStatus.FAILED)
        kept = f" ({get('checkpoints')} checkpoints committed before)" if get("interim_commits") else ""
        whys.append(f"the final commit failed: {stats.get('pith/commit_error') or 'the run did not finish'}{kept}")
    elif failed > allowed_failures(budget, max(get("records_found"), 1)):
        statuses.append(ExitStatus.FAILED)
        whys.append(f"{failed} fetch failures, more than --max-failures allows")
    elif failed:
        statuses.append(ExitStatus.PARTIAL)
        whys.append(f"{failed} fetch failures (within --max-failures): rerun to fetch them")
    if get("rejected"):
        statuses.append(ExitStatus.REJECTED)
        whys.append(f"{get('rejected')} bundles rejected by verification (kept in quarantine/)")
    if get("equivocations"):
        statuses.append(ExitStatus.REJECTED)
        whys.append(
            f"{get('equivocations')} split views: resolvers served forked histories of a record "
            "(both copies kept, flagged equivocation in verifications)"
        )
    status = worst(*statuses)
    return CrawlOutcome(status, "; ".join(whys) or "done", failures, rejections)


def _under(stats: dict, prefix: str) -> dict:
    return {key[len(prefix) :]: value for key, value in stats.items() if key.startswith(prefix) and value}


def registry_changes(stats: dict) -> list[str]:
    """What changed at the registry, each a line saying what to do: records archived with
    a merge rule only inferred, a key the registry announces unpinned, bundles signed by
    unpinned keys (most of them: a rotation), versions this archiver does not know."""
    lines = []
    inferred = stats.get("pith/merge_inferred", 0)
    if inferred:
        types = _counts(_under(stats, "pith/merge_inferred/"))
        differs = stats.get("pith/merge_inferred_differs", 0)
        lines.append(
            f"merge inferred: {inferred} verified bundles hold event types whose merge rule is only "
            f"inferred ({types}); archived with merge_confirmed false"
            + (f", {differs} with a signed state the inferred rule does not give" if differs else "")
        )
    announced = _under(stats, "pith/announced_keys/unpinned/")
    named = ", ".join(f"{key_id} (fingerprint {fingerprint})" for key_id, fingerprint in sorted(announced.items()))
    unknown = _under(stats, "pith/unknown_keys/")
    rejected_unknown, fetched = sum(unknown.values()), stats.get("pith/bundles_fetched", 0)
    if rejected_unknown and rejected_unknown * 2 > fetched:
        lines.append(
            f"key rotation: {rejected_unknown} of {fetched} bundles are signed by keys not pinned "
            f"({_counts(unknown)}): the registry has probably rotated its key"
            + (f"; it announces {named}" if named else "")
            + ". Check the new key out of band, pin it (pith-archiver keys pin) and crawl again"
        )
    elif named:
        lines.append(
            f"unpinned key: the registry announces {named}; bundles it signs are rejected "
            "until it is pinned (pith-archiver keys pin)"
        )
    versions = _under(stats, "pith/unsupported_versions/")
    if versions:
        lines.append(
            f"unknown versions: {_counts(versions)}: this archiver does not know them; upgrade "
            "pith-archiver (the bundles wait in quarantine/, nothing was guessed)"
        )
    return lines


CACHES = {
    "validators": "validators dropped",
    "job": "the job's state dropped",
    "frontier": "the frontier's claims dropped",
}


def cache_note(stats: dict) -> str:
    """One line when state kept outside the archive (a cache of it) did not match the
    archive and was dropped, so its records were crawled again; "" when it matched."""
    dropped = [what for cache, what in CACHES.items() if stats.get(f"{CACHE_DROPPED}{cache}")]
    return f"cache did not match the archive: {', '.join(dropped)}" if dropped else ""


def hosts_line(stats: dict) -> str:
    """Requests and records per source, when the crawl spread over more than one
    (crawler.spread); "" otherwise."""
    hosts: dict[str, dict] = {}
    for key, value in stats.items():
        if key.startswith(HOSTS):
            host, _, what = key[len(HOSTS) :].rpartition("/")
            hosts.setdefault(host, {})[what] = value
    if len(hosts) < 2:
        return ""
    parts = []
    for host, counts in sorted(hosts.items()):
        bad = ", ".join(f"{what} {counts[what]}" for what in BAD if counts.get(what))
        parts.append(
            f"{host} {counts.get('requests', 0)} requests, {counts.get('records', 0)} records"
            + (f" ({bad})" if bad else "")
        )
    demoted = stats.get("pith/mirrors_demoted", 0)
    return "sources: " + "; ".join(parts) + (f"; {demoted} mirrors demoted" if demoted else "")


def _counts(reasons: dict) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))


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
    get = lambda key: stats.get(f"pith/{key}", 0)  # noqa: E731
    result = outcome(stats, budget, shared)
    reached = get("bundles_fetched") + get("not_modified")
    requests = stats.get("downloader/request_count", 0)
    per_record = f" ({requests / reached:.2f} per record)" if reached else ""
    line = (
        f"{result.status.name.lower()} (exit {int(result.status)}): archived {get('archived')} new, "
        f"{get('not_modified') + get('already_archived')} unchanged, {get('rejected')} rejected, "
        f"{sum(result.failures.values())} failed, {requests} requests{per_record}"
    )
    if get("equivocations"):
        line += f", {get('equivocations')} split views"
    if verbosity <= QUIET:
        changes = [change.split(":", 1)[0] for change in registry_changes(stats)]
        if changes:
            line += "; registry changed: " + ", ".join(changes)
        if cache_note(stats):
            line += f"; {cache_note(stats)}"
        if result.status == ExitStatus.INTERRUPTED and resume:
            line += f"; resume with: {resume}"
        click.echo(line, err=result.status != ExitStatus.OK)
        return result.status
    click.echo(
        f"\nrecords found {get('records_found')}, bundles fetched {get('bundles_fetched')}, "
        f"verified {get('verified')}, rejected {get('rejected')}, unchanged {get('not_modified')}, "
        f"archived {get('archived')} new, state mismatches {get('state_mismatch')}"
    )
    click.echo(
        f"requests {requests}{per_record}, retried {stats.get('retry/count', 0)}, "
        "download errors "
        f"{sum(v for k, v in stats.items() if k.startswith('downloader/exception_type_count/'))}"
    )
    if result.failures:
        click.echo("fetch failures: " + _counts(result.failures))
    if result.rejections:
        click.echo("rejections: " + _counts(result.rejections))
    if get("cross_check/records"):
        click.echo(
            f"cross-check: {get('cross_check/records')} records, {get('cross_check/copies')} copies from "
            f"other sources ({get('cross_check/failures')} failed): same {get('cross_check/same')}, "
            f"extends {get('cross_check/extends')}, split views {get('equivocations')}"
        )
    for line in registry_changes(stats):
        click.echo(line)
    if cache_note(stats):
        click.echo(cache_note(stats))
    if hosts_line(stats):
        click.echo(hosts_line(stats))
    manifest, checkpoints = stats.get("pith/manifest"), get("interim_commits")
    if manifest and not stats.get("pith/commit_error"):
        click.echo(
            f"committed {archive}/{manifest}" + (f" (and {checkpoints} checkpoints before)" if checkpoints else "")
        )
    elif checkpoints:
        click.echo(f"{checkpoints} checkpoints committed, the last {archive}/{manifest}")
    if log_file:
        click.echo(f"log: {log_file}")
    why = result.why
    if result.status == ExitStatus.INTERRUPTED:
        why = f"what was archived is committed; resume with: {resume}" if resume else why
    click.echo(f"{result.status.name.lower()} (exit {int(result.status)}): {why}", err=result.status != ExitStatus.OK)
    return result.status
