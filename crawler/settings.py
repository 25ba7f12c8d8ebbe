"""Settings of the pith-archiver Scrapy project: polite and robust by default.

``PITH_*`` settings are ours (their defaults in ``crawler.defaults``); everything else
is Scrapy's own. The command line (``pith-archiver crawl``) and ``scrapy crawl pith -s
NAME=VALUE`` both start from here.
"""

from scrapy.settings import default_settings

from pith.parse import DEFAULT_MAX_BYTES
from pith.shipped import version

# Ours: the PITH_* settings, defined in crawler/defaults.py (read there without Scrapy)
from .defaults import *  # noqa: F403

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
# each crawl) for an unattended job nobody attaches to.
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
# Scrapy's check that a generator callback returns no value parses the callback's source
# again whenever its weak cache misses (a bound method per request): 4% of a crawl's
# thread. tests/test_links.py runs the same check over the spider's callbacks once.
WARN_ON_GENERATOR_RETURN_VALUE = False
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = DEFAULT_MAX_BYTES  # the parser's one limit (pith.parse): a larger body is never fetched whole
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
REDIRECT_MAX_TIMES = 5

# Retries: Scrapy's codes and exceptions, with backoff and Retry-After.
RETRY_ENABLED = True
RETRY_TIMES = 4
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408, 429]

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
    "crawler.scheduling.freshness.Freshness": 0,  # PITH_ARCHIVE and PITH_LISTED_DATES: a re-crawl asks what changed
}

# records wait on disk (PITH_FRONTIER: FrontierScheduler)
SCHEDULER = "crawler.scheduling.local_scheduler.LocalScheduler"

FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"
