"""Settings of the pith-archiver Scrapy project: polite and robust by default.

``PITH_*`` settings are ours; everything else is Scrapy's own. The command line
(``pith-archiver crawl``) and ``scrapy crawl pith -s NAME=VALUE`` both start from here.
"""

from scrapy.settings import default_settings

from pith.parse import DEFAULT_MAX_BYTES
from pith.shipped import version

BOT_NAME = "pith-archiver"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

USER_AGENT = f"pith-archiver/{version()} (scholarly record preservation; +https://pypi.org/project/pith-archiver/)"
ROBOTSTXT_OBEY = True
COOKIES_ENABLED = False
# No Referer header: a resolver's bundles and pages need not know which page named them,
# and the referrer policy's parsing of both URLs was ~2% of Scrapy's thread per request.
REFERER_ENABLED = False
# No port of ours listens during a crawl: no telnet console, and no Scrapy 2.19 remote
# control (an HTTP server that runs code sent to it, and a job file under ~/.local/state
# each run) for an unattended job nobody attaches to.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
# Those components are left out of Scrapy's base lists too (derived from Scrapy's own,
# so any other default stays): Scrapy imports every listed component to merge the
# lists, even one set to None, and the remote control's aiohttp costs every crawl
# 10 MiB, the cookie middleware's tldextract and requests 2.5 MiB.
_NEVER_LOADED = {
    "scrapy.extensions.remote_control.RemoteControl",
    "scrapy.extensions.telnet.TelnetConsole",
    "scrapy.downloadermiddlewares.cookies.CookiesMiddleware",
}
EXTENSIONS_BASE = {k: v for k, v in default_settings.EXTENSIONS_BASE.items() if k not in _NEVER_LOADED}
DOWNLOADER_MIDDLEWARES_BASE = {
    k: v for k, v in default_settings.DOWNLOADER_MIDDLEWARES_BASE.items() if k not in _NEVER_LOADED
}

# Scrapy's in-memory stats, without its deprecation check on every attribute read
STATS_CLASS = "crawler.stats_collector.PlainStatsCollector"

# Politeness: adaptive delay, a per-host cap, bounded everything.
AUTOTHROTTLE_ENABLED = True
AUTOTHROTTLE_START_DELAY = 0.25
AUTOTHROTTLE_MAX_DELAY = 30.0
AUTOTHROTTLE_TARGET_CONCURRENCY = 4.0
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOADER = "crawler.downloading.downloader.CappedDownloader"  # Scrapy 2.19 does not enforce the cap above
# Each callback yields one to three outputs, and Scrapy starts CONCURRENT_ITEMS tasks
# per callback to process them: the default 100 costs more than verifying a bundle.
CONCURRENT_ITEMS = 8
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = DEFAULT_MAX_BYTES  # the parser's one limit (pith.parse): a larger body is never fetched whole
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
REDIRECT_MAX_TIMES = 5

# Retries: Scrapy's codes and exceptions, with backoff and Retry-After.
RETRY_ENABLED = True
RETRY_TIMES = 4
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408, 429]
PITH_ROBOTSTXT_DEADLINE = 10.0  # seconds a robots.txt request may take, retries included (crawler.downloading.robots)
PITH_RETRY_BACKOFF_BASE = 0.5
PITH_RETRY_BACKOFF_MAX = 30.0
PITH_RETRY_AFTER_MAX = 120.0

DOWNLOADER_MIDDLEWARES = {
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    "crawler.downloading.spread.SourceSlots": 40,  # each source (host:port) its own download slot
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "crawler.downloading.robots.SourceRobots": 100,  # Scrapy's, each source's robots.txt asked up front, to a deadline
    "crawler.downloading.on_site.OnSiteMiddleware": 50,  # redirects never leave the crawl's hosts
    "crawler.downloading.unreachable.UnreachableSources": 545,  # the errors the retries gave up on, by source
    "crawler.downloading.retries.BackoffRetryMiddleware": 550,
    "crawler.spider_mixins.cross_check.CrossCheckSample": 555,  # with PITH_CROSS_CHECK; before the conditional requests
    "crawler.downloading.conditional.ConditionalRequestMiddleware": 560,
    "crawler.downloading.json_charset.JsonCharsetMiddleware": 595,  # after HttpCompression (590) in the response path
    # with PITH_WARC and CrawlArchive: first to see a response, as received
    "crawler.downloading.warc_recorder.WarcRecorder": 950,
}

ITEM_PIPELINES = {
    "pipelines.verdict_stats.VerdictStatsPipeline": 100,
    "pipelines.split_view.SplitViewPipeline": 200,  # with PITH_CROSS_CHECK
    "pipelines.archive.ArchivePipeline": 300,
}

# PITH_FRONTIER set: scrapy-redis's scheduler, queue and duplicate filter (crawler.frontier).
ADDONS = {
    "crawler.frontier.FrontierAddon": 0,
}

EXTENSIONS = {
    "crawler.frontier.Frontier": 0,  # PITH_FRONTIER set: the crawl's handle on the shared frontier
    "crawler.extensions.crawl_archive.CrawlArchive": 0,  # PITH_ARCHIVE set: the archive and WARC writers
    "crawler.extensions.progress.Progress": 500,
    "crawler.extensions.statsfile.StatsFile": 510,
    "crawler.scheduling.jobdir.JobdirGuard": 0,  # a --jobdir left by a killed crawl is reset, not half-resumed
    "crawler.extensions.key_watch.SigningKeyWatch": 100,
    "crawler.extensions.collector.CollectorThreshold": 0,
    "crawler.extensions.record_ledger.RecordLedger": 0,
    "crawler.scheduling.freshness.Freshness": 0,  # PITH_ARCHIVE and PITH_LISTED_DATES: a re-run asks what changed
}

# Ours.
PITH_ARCHIVE = "archive"  # a folder or s3://bucket/prefix
PITH_KEYRINGS: list[str] = []  # extra keyring files
PITH_DEFAULT_KEYS = True  # trust the built-in registry key
PITH_WATCH_SIGNING_KEY = True  # compare the resolver's /pith-signing-key.json with the keyring at start
PITH_SIGNING_KEY = None  # the archiver key file (None: created in the user config folder)
PITH_LOG_ORIGIN = None  # names this key's transparency log when it has none yet (None: pith-archiver/<key id>)
PITH_WORKER = None  # names this worker in run ids and the frontier (None: host.pid; crawler.worker)
PITH_VERIFY_WORKERS = None  # processes that parse and verify bundles off the reactor (None: one where the
# crawl may use 2 cores or more, else 0; 0: in the crawl's own thread)
PITH_CHECK_STATE = 0.0  # share of records (0 to 1) whose state.json is fetched and compared with
# the bundle's signed state (--check-state); 0: none
PITH_CROSS_CHECK = 0  # records (the first N bundles per worker) also fetched from every mirror and
# compared for split views (--cross-check); 0: none
PITH_MIRROR_DEMOTE_AFTER = 3  # bad copies (rejected, wrong record, stale, forked, failed) a mirror may serve before
# it gets no more requests
# bundle requests in flight to a mirror until it has served good copies (crawler.downloading.spread)
PITH_MIRROR_HOLD_BACK = 2
# records wait on disk (PITH_FRONTIER: FrontierScheduler)
SCHEDULER = "crawler.scheduling.local_scheduler.LocalScheduler"
PITH_LISTED_DATES = True  # a re-run skips held records its listing dates as unchanged (crawler.scheduling.freshness)
PITH_RECHECK_AFTER_DAYS = 30.0  # ... and asks again any record not confirmed for this many days
PITH_CONDITIONAL_REQUESTS = True  # send the validators saved at earlier commits (If-None-Match / If-Modified-Since)
PITH_STATE_DIR = None  # where conditional-request validators live (None: off)
PITH_PROGRESS = "auto"  # "auto" (a live line on a terminal), "log", or "off"
PITH_PROGRESS_INTERVAL = 1.0
PITH_STATS_FILE = None  # write the final stats here as JSON
PITH_ARCHIVE_KEYRINGS: list[
    str
] = []  # archiver keys (besides ours) whose manifests count for dedup: the other workers'
PITH_UPLOAD_MAX_BYTES_IN_FLIGHT = 128 * 1024 * 1024  # bytes queued for upload before adds wait
PITH_GC_THRESHOLD = 10_000  # allocations between young-object collections during a crawl (0: Python's 700)
PITH_WARC = True  # record every exchange in WARC/1.1 files in the archive (--no-warc: off)
PITH_WARC_MAX_BYTES = 1024 * 1024 * 1024  # a WARC file is rolled past this size (and at every commit)
PITH_WARC_STALL_TIMEOUT = 30.0  # seconds a WARC writer may take no record (or not answer) before it is killed
PITH_WARC_QUEUE_BYTES = 64 * 1024 * 1024  # records waiting for the WARC writer; past it responses wait
PITH_COMMIT_EVERY = 10_000  # commit a manifest (an interim commit) every N bundles; 0: only when the crawl ends
# seconds a crawl stopping at once (Ctrl-C twice, SIGTERM) may take to commit before it quits without committing
PITH_STOP_GRACE = 60.0
# redis://host:port/db: a frontier shared with other workers (None: this process alone)
PITH_FRONTIER = None
PITH_FRONTIER_KEY = "pith"  # names this crawl's keys in that Redis (one key per crawl)
PITH_FRONTIER_LEASE = 30.0  # seconds without a heartbeat before a worker counts as dead and its tasks move on
PITH_FRONTIER_IDLE_CLOSE = 5.0  # seconds all workers must stay idle with the queue empty before they close
PITH_FRONTIER_POLL = 0.25  # seconds between a worker's looks at the shared queue and the others' leases
PITH_FRONTIER_UNREACHABLE_MAX = 300.0  # seconds a worker goes on without reaching the frontier before it
# stops (what it archived is committed; its tasks return to the others when its lease runs out)

FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"
