"""The defaults of the crawl's own settings (``PITH_*``), which ``crawler.settings`` gives
Scrapy with its own. Kept apart, importing nothing of Scrapy, so that the command line's
help, its checks and a sync from a peer archive (which runs no Scrapy) read each
default from the one place it is defined without starting Scrapy.
"""

PITH_ROBOTSTXT_DEADLINE = 10.0  # seconds a robots.txt request may take, retries included (crawler.downloading.robots)
PITH_RETRY_BACKOFF_BASE = 0.5
PITH_RETRY_BACKOFF_MAX = 30.0
PITH_RETRY_AFTER_MAX = 120.0

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
PITH_LISTED_DATES = True  # a re-crawl skips held records its listing dates as unchanged (crawler.scheduling.freshness)
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
PITH_VERIFY_TIMEOUT = 60.0  # seconds a verifier process holding bundles may answer nothing before it is replaced
PITH_WARC_STALL_TIMEOUT = 30.0  # seconds a WARC writer may take no record (or not answer) before it is killed
PITH_WARC_QUEUE_BYTES = 8 * 1024 * 1024  # records waiting for the WARC writer; past it responses wait
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
