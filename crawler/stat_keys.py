"""Every Scrapy stats key a crawl writes under ``pith/``, in one place.

The stats are the crawl's one record of what happened: the progress line, the
closing summary, the exit status, ``--stats-json``, the metrics file and the
notifications all read them (``pith_archiver.crawl_stats`` turns them into one typed
value), so a key is written and read by its name here, never spelled twice.
"""

from dataclasses import dataclass, field
from typing import Final


class Stat:
    """A count or value under one key (plain strings: Scrapy's stats dump prints them as keys)."""

    # records and their bundles
    RECORDS_FOUND: Final = "pith/records_found"
    REQUESTS_HELD_MAX: Final = "pith/requests_held_max"  # in the local scheduler's memory at once
    RECORDS_TAKEN_BEFORE: Final = "pith/records_taken_before"
    RECORDS_SKIPPED_MAX_RECORDS: Final = "pith/records_skipped_max_records"
    RECORDS_UNACCOUNTED: Final = "pith/records_unaccounted"  # opened, never settled (crawler.extensions.record_ledger)
    SITEMAPS_SKIPPED_MAX_RECORDS: Final = "pith/sitemaps_skipped_max_records"
    # a scheduled re-crawl (crawler.scheduling.freshness): held records its listing dates as
    # unchanged, not asked; sitemaps whose index date did not move, not read; the sample and
    # the records past PITH_RECHECK_AFTER_DAYS asked again; sampled records found changed
    # although dated unchanged; 1 when the source's dates are not trusted
    # Each held record is counted once: not asked (SKIPPED_BY_DATE), or asked because dated
    # changed, sampled, due, or swept (the dates not trusted); they add up to RECORDS_HELD
    RECORDS_HELD: Final = "pith/records_held"
    SKIPPED_BY_DATE: Final = "pith/records_skipped_by_date"
    ASKED_DATED: Final = "pith/records_dated_changed"
    RECHECK_SAMPLE: Final = "pith/recheck_sample"
    RECHECK_DUE: Final = "pith/recheck_due"
    ASKED_SWEPT: Final = "pith/records_swept"
    SITEMAPS_UNCHANGED: Final = "pith/sitemaps_unchanged"
    FUTURE_DATES: Final = "pith/dates_in_future"  # a source's dates past the clock plus a day: no date
    LASTMOD_LIES: Final = "pith/lastmod_lies"
    LASTMOD_DISTRUSTED: Final = "pith/lastmod_distrusted"
    CHANGE_LISTS_READ: Final = "pith/change_lists_read"  # ResourceSync Change List pages read instead of sitemaps
    CHANGES_IGNORED: Final = "pith/changes_ignored"  # their entries that name no record, or a deletion
    CHANGE_LISTS_UNREAD: Final = "pith/change_lists_unread"  # 1: published, but not read (the sitemaps were)
    BUNDLES_FETCHED: Final = "pith/bundles_fetched"
    PAGES_FETCHED: Final = "pith/pages_fetched"
    NOT_MODIFIED: Final = "pith/not_modified"
    CONDITIONAL_REQUESTS: Final = "pith/conditional_requests"
    REQUESTS_PER_RECORD: Final = "pith/requests_per_record"
    REDIRECTS_LEARNT: Final = "pith/redirects_learnt"
    RETRY_AFTER_HONOURED: Final = "pith/retry_after_honoured"
    # in flight when the crawl stopped at once (crawler.downloading.downloader)
    REQUESTS_DROPPED: Final = "pith/requests_dropped"
    ROBOTS_FORBIDDEN: Final = "pith/robots_forbidden"
    # what went wrong fetching
    SEEDS_UNRESOLVED: Final = "pith/seeds_unresolved"
    PAGE_FAILURES: Final = "pith/page_failures"
    PAGE_FAILURES_AFTER_BUNDLE: Final = "pith/page_failures_after_bundle"
    STATE_MISMATCH: Final = "pith/state_mismatch"
    STATE_UNAVAILABLE: Final = "pith/state_unavailable"
    ITEM_ERRORS: Final = "pith/item_errors"  # items a pipeline raised on: their records are not archived
    # verification
    VERIFIED: Final = "pith/verified"
    REJECTED: Final = "pith/rejected"
    MERGE_INFERRED: Final = "pith/merge_inferred"
    MERGE_INFERRED_DIFFERS: Final = "pith/merge_inferred_differs"
    VERIFY_WORKERS: Final = "pith/verify_workers"
    VERIFY_POOL_RESTARTS: Final = "pith/verify_pool_restarts"
    ANNOUNCED_KEYS_PINNED: Final = "pith/announced_keys/pinned"
    ANNOUNCED_KEYS_CONFLICTS: Final = "pith/announced_keys/conflicts"
    # the archive
    ARCHIVED: Final = "pith/archived"
    ALREADY_ARCHIVED: Final = "pith/already_archived"
    QUARANTINED: Final = "pith/quarantined"
    NOT_APPEND_ONLY: Final = "pith/not_append_only"
    EQUIVOCATIONS: Final = "pith/equivocations"
    INTERIM_COMMITS: Final = "pith/interim_commits"
    RUN_ID: Final = "pith/run_id"
    MANIFEST: Final = "pith/manifest"
    COMMIT_ERROR: Final = "pith/commit_error"
    UNCOMMITTED: Final = "pith/uncommitted"  # bundles archived new that no commit holds: the final commit failed
    ARROW_MEMORY_POOL: Final = "pith/arrow_memory_pool"
    ELAPSED_SECONDS: Final = "pith/elapsed_seconds"
    JOBDIR_RESET: Final = "pith/jobdir_reset"
    STOPPED_BY: Final = "pith/stopped_by"  # the signal that stopped the crawl: SIGINT or SIGTERM
    # the WARC files (crawler.downloading.warc_recorder)
    WARC_RESPONSES: Final = "pith/warc_responses"
    WARC_FAILURES: Final = "pith/warc_failures"
    WARC_UNRECORDED: Final = (
        "pith/warc_unrecorded"  # exchanges before the archive opened (robots.txt, the key document)
    )
    WARC_ERRORS: Final = "pith/warc_errors"  # exchanges no WARC file holds
    WARC_STOPPED: Final = "pith/warc_stopped"  # why the WARC writer stopped before the crawl ended
    # several sources (crawler.downloading.spread, crawler.spider_mixins.cross_check)
    MIRROR_FALLBACKS: Final = "pith/mirror_fallbacks"
    MIRROR_REFETCHES: Final = "pith/mirror_refetches"
    MIRRORS_DEMOTED: Final = "pith/mirrors_demoted"
    CROSS_CHECK_RECORDS: Final = "pith/cross_check/records"
    CROSS_CHECK_COPIES: Final = "pith/cross_check/copies"
    CROSS_CHECK_FAILURES: Final = "pith/cross_check/failures"
    CROSS_CHECK_ALONE: Final = "pith/cross_check/alone"
    # a shared crawl's frontier
    FRONTIER_LOST: Final = "pith/frontier_lost"
    FRONTIER_RECOVERED: Final = "pith/frontier_recovered"
    FRONTIER_RELEASED: Final = "pith/frontier_released"


BAD_COPIES = ("rejected", "wrong_record", "stale", "forked", "failed", "robots_failed")  # a source's, by kind


class StatFamily:
    """Keys that end in a name: a reason, a host, an event type."""

    REJECTED: Final = "pith/rejected/"  # <reason>
    BUNDLE_FAILURES: Final = "pith/bundle_failures/"  # <reason>: fetch_failed, too_large
    DISCOVERY_FAILURES: Final = "pith/discovery_failures/"  # <what>: sitemap, sitemap_unreadable
    MERGE_INFERRED: Final = "pith/merge_inferred/"  # <event type>
    UNKNOWN_KEYS: Final = "pith/unknown_keys/"  # <key id>
    UNSUPPORTED_VERSIONS: Final = "pith/unsupported_versions/"  # <member>=<value>
    ANNOUNCED_UNPINNED: Final = "pith/announced_keys/unpinned/"  # <key id>: its fingerprint
    CROSS_CHECK: Final = "pith/cross_check/"  # <relation>: same, extends, fork
    CACHE_DROPPED: Final = "pith/cache_dropped/"  # <cache>: validators, job, frontier, listings
    # <host:port>/<what>: requests, records, demoted, or a bad copy (BAD_COPIES)
    HOSTS: Final = "pith/hosts/"
    # <outcome>: archived, unchanged, rejected, failed, forbidden (crawler.extensions.record_ledger)
    RECORDS: Final = "pith/records/"
    FRONTIER_REFUSED: Final = "pith/frontier_refused/"  # <reason>
    UNREACHABLE: Final = (
        "pith/unreachable/"  # <host:port>: why it could not be reached (crawler.downloading.unreachable)
    )


def read_family(stats: dict, family: str) -> dict:
    """The non-zero values in ``stats`` of one StatFamily, by the name that ends their key."""
    return {key[len(family) :]: value for key, value in stats.items() if key.startswith(family) and value}


PREFIX = "pith/"  # every key above starts with it
# records that could not be had after retries and mirror fallbacks (a page failing after
# its record's bundle failed is that record's, already counted)
FAILURE_FAMILIES = (StatFamily.BUNDLE_FAILURES, StatFamily.DISCOVERY_FAILURES)
FAILURE_STATS = (Stat.SEEDS_UNRESOLVED, Stat.PAGE_FAILURES, Stat.ITEM_ERRORS)


def fetch_failures(stats: dict) -> dict[str, int]:
    """Records the crawl could not have, by reason: what ``--max-failures`` counts, the
    progress line calls "failed" and the summary lists."""
    found: dict[str, int] = {}
    for family in FAILURE_FAMILIES:
        for reason, count in read_family(stats, family).items():
            found[reason] = found.get(reason, 0) + count
    for key in FAILURE_STATS:
        if stats.get(key):
            found[key.removeprefix(PREFIX)] = stats[key]
    return found


@dataclass(frozen=True)
class CrawlStats:
    """A crawl's stats, read once into typed fields: what its summary, exit status,
    metrics and notifications are computed from."""

    records_found: int = 0
    records_taken_before: int = 0
    bundles_fetched: int = 0
    not_modified: int = 0
    verified: int = 0
    rejected: int = 0
    archived: int = 0
    already_archived: int = 0
    state_mismatch: int = 0
    unaccounted: int = 0
    uncommitted: int = 0  # archived new, lost with a failed commit (counted in ``archived`` too)
    equivocations: int = 0
    interim_commits: int = 0
    requests: int = 0
    retries: int = 0
    download_errors: int = 0
    cross_check_records: int = 0
    cross_check_copies: int = 0
    cross_check_failures: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # reason -> records (fetch_failures)
    rejections: dict[str, int] = field(default_factory=dict)  # reason -> bundles
    cross_check: dict[str, int] = field(default_factory=dict)  # relation -> pairs of copies compared
    run_id: str | None = None
    manifest: str | None = None  # the latest manifest committed
    commit_error: str | None = None
    frontier_lost: str | None = None
    finish_reason: str | None = None
    stopped_by: str | None = None  # SIGINT or SIGTERM
    requests_dropped: int = 0
    warc_not_recorded: int = 0  # exchanges no WARC file holds
    warc_stopped: str | None = None  # why the WARC writer stopped
    forbidden: int = 0  # records robots.txt forbids
    unreachable: dict[str, str] = field(default_factory=dict)  # host:port -> the last download error's cause

    @classmethod
    def of(cls, stats: dict) -> "CrawlStats":
        def count(key: str) -> int:
            return stats.get(key) or 0

        return cls(
            records_found=count(Stat.RECORDS_FOUND),
            records_taken_before=count(Stat.RECORDS_TAKEN_BEFORE),
            bundles_fetched=count(Stat.BUNDLES_FETCHED),
            not_modified=count(Stat.NOT_MODIFIED),
            verified=count(Stat.VERIFIED),
            rejected=count(Stat.REJECTED),
            archived=count(Stat.ARCHIVED),
            already_archived=count(Stat.ALREADY_ARCHIVED),
            state_mismatch=count(Stat.STATE_MISMATCH),
            unaccounted=count(Stat.RECORDS_UNACCOUNTED),
            uncommitted=count(Stat.UNCOMMITTED),
            equivocations=count(Stat.EQUIVOCATIONS),
            interim_commits=count(Stat.INTERIM_COMMITS),
            requests=count("downloader/request_count"),
            retries=count("retry/count"),
            download_errors=sum(read_family(stats, "downloader/exception_type_count/").values()),
            cross_check_records=count(Stat.CROSS_CHECK_RECORDS),
            cross_check_copies=count(Stat.CROSS_CHECK_COPIES),
            cross_check_failures=count(Stat.CROSS_CHECK_FAILURES),
            failures=fetch_failures(stats),
            rejections=read_family(stats, StatFamily.REJECTED),
            cross_check={
                relation: value
                for relation, value in read_family(stats, StatFamily.CROSS_CHECK).items()
                if relation not in ("records", "copies", "failures", "alone")
            },
            run_id=stats.get(Stat.RUN_ID),
            manifest=stats.get(Stat.MANIFEST),
            commit_error=stats.get(Stat.COMMIT_ERROR),
            frontier_lost=stats.get(Stat.FRONTIER_LOST),
            finish_reason=stats.get("finish_reason"),
            stopped_by=stats.get(Stat.STOPPED_BY),
            requests_dropped=count(Stat.REQUESTS_DROPPED),
            warc_not_recorded=count(Stat.WARC_ERRORS),
            warc_stopped=stats.get(Stat.WARC_STOPPED),
            forbidden=count(Stat.ROBOTS_FORBIDDEN),
            unreachable=read_family(stats, StatFamily.UNREACHABLE),
        )

    @property
    def reached(self) -> int:
        """Records whose bundle was fetched or found unchanged."""
        return self.bundles_fetched + self.not_modified

    @property
    def committed(self) -> int:
        """Bundles archived new that a commit holds."""
        return self.archived - self.uncommitted

    @property
    def unchanged(self) -> int:
        return self.not_modified + self.already_archived

    @property
    def failed(self) -> int:
        return sum(self.failures.values())
