"""What a crawl is given, built and checked once: the one road into the crawl.

Two functions build it. ``pith-archiver crawl`` (and its demo) builds it from its
options (``pith_archiver.crawl.run.config_of``), each mistake one line before the
first request, and hands it to the spider (``config=``); ``scrapy crawl pith`` and
Scrapyd build it from the settings and spider arguments when the spider is made
(``CrawlConfig.from_settings``). Both take the tuning only settings give (the WARC
policy, the commit interval...; ``-s`` on the command line too) from ``tuned_by``.
Every component reads this one object (``crawl_config(crawler)``), never the spider's
attributes or the raw settings for what it holds. Scrapy's own plumbing stays in
settings: ``JOBDIR``, ``PITH_FRONTIER`` (an add-on, set before the spider exists), logs.

The project's settings reach every spider run in a checkout (``scrapy.cfg``), the
``scrapy runspider`` of someone else's spider too: each of the project's pipelines,
extensions and middlewares asks ``pith_crawl_only(crawler)`` first, and stays out
(NotConfigured) of a crawl whose spider holds no CrawlConfig.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pith.keyring import ARCHIVE, Keyring, KeyringError
from pith.signing import Signer
from storage.archive.open_store import open_store
from storage.archive.signing_key import load_or_create
from storage.archive.stores import ObjectStore

from . import defaults
from .seeds import SeedList

if TYPE_CHECKING:  # the command line builds a config without Scrapy (a sync from a peer runs none);
    # storage.capture.warc imports pyarrow, which the crawl command tunes first (pith_archiver.crawl.tuning)
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from storage.capture.warc import WarcPolicy

DEFAULT_RESOLVER = "https://pith.science"
# the spider arguments (``scrapy crawl pith -a NAME=VALUE``) the config takes; any other
# is left to Scrapy (it becomes a spider attribute, as Scrapyd's ``_job``)
ARGUMENTS = frozenset(
    ("seeds", "seeds_file", "resolver", "mirrors", "mirrors_from_registry", "allow_hosts")
    + ("max_records", "max_depth", "follow")
)


@dataclass(frozen=True)
class CrawlConfig:
    # what to crawl
    seeds: SeedList
    resolver: str = DEFAULT_RESOLVER  # a base URL without its trailing slash
    mirrors: tuple[str, ...] = ()  # other sources of the bundles (--mirror)
    mirrors_from_registry: bool = False  # also the mirrors the resolver's /pith-mirrors.json lists
    allow_hosts: tuple[str, ...] = ()  # other hosts the crawl may fetch from
    # how far
    max_records: int = 0  # 0: no bound
    max_depth: int = -1  # link hops from the seeds; -1: no bound
    follow: bool = True  # False: the seeds only
    check_state: float = defaults.PITH_CHECK_STATE  # share of records whose state.json is compared
    cross_check: int = defaults.PITH_CROSS_CHECK  # records also fetched from every mirror
    recheck_after: timedelta = timedelta(days=defaults.PITH_RECHECK_AFTER_DAYS)  # a held record not confirmed
    # this long is asked again
    # trust
    keyring: Keyring = Keyring([])  # verifies the bundles (PITH_KEYRINGS, PITH_DEFAULT_KEYS)
    archive_keyring: Keyring = Keyring([])  # the other workers' archiver keys (PITH_ARCHIVE_KEYRINGS)
    # where it goes
    store: ObjectStore | None = None  # the archive (PITH_ARCHIVE, AWS_ENDPOINT_URL); None: archive nothing
    signer: Signer | None = None  # signs what the crawl commits (PITH_SIGNING_KEY)
    commit_every: int = defaults.PITH_COMMIT_EVERY  # an interim commit every N bundles; 0: only at the end
    warc: WarcPolicy | None = None  # None: no WARC files (PITH_WARC and PITH_WARC_*)
    log_origin: str | None = defaults.PITH_LOG_ORIGIN  # names this key's log when it has none yet
    worker: str | None = defaults.PITH_WORKER  # this worker's name (None: host.pid)
    state_dir: str | None = defaults.PITH_STATE_DIR  # the crawl's own state: validators, logs

    @classmethod
    def from_settings(cls, settings: BaseSettings, arguments: Mapping[str, Any]) -> CrawlConfig:
        """``scrapy crawl pith`` and Scrapyd: from Scrapy's settings and the spider's
        arguments (strings from ``-a``). KeyringError, SeedError or ValueError (a
        store location) for what cannot work."""
        keyring = Keyring.build(settings.getlist("PITH_KEYRINGS"), settings.getbool("PITH_DEFAULT_KEYS"))
        if not len(keyring):  # a crawl without its verifier would archive nothing (or worse)
            raise KeyringError("the keyring is empty: nothing could verify (PITH_KEYRINGS, PITH_DEFAULT_KEYS)")
        archive = settings.get("PITH_ARCHIVE")
        max_depth = arguments.get("max_depth")
        return cls(
            seeds=SeedList(as_list(arguments.get("seeds")), arguments.get("seeds_file") or None),
            resolver=str(arguments.get("resolver") or DEFAULT_RESOLVER).rstrip("/"),
            mirrors=tuple(mirror.rstrip("/") for mirror in as_list(arguments.get("mirrors"))),
            mirrors_from_registry=as_bool(arguments.get("mirrors_from_registry", False)),
            allow_hosts=tuple(as_list(arguments.get("allow_hosts"))),
            max_records=int(arguments.get("max_records") or 0),
            max_depth=int(max_depth if max_depth is not None else -1),
            follow=as_bool(arguments.get("follow", True)),
            keyring=keyring,
            archive_keyring=Keyring.build(settings.getlist("PITH_ARCHIVE_KEYRINGS"), default_keys=False, role=ARCHIVE),
            store=open_store(archive, endpoint_url=settings.get("AWS_ENDPOINT_URL")) if archive else None,
            signer=load_or_create(settings.get("PITH_SIGNING_KEY")) if archive else None,
            **tuned_by(settings),
        )

    def describe(self) -> dict:
        """What the crawl was asked, as its manifests record it (``spider_args``)."""
        return {
            **self.seeds.describe(),
            "resolver": self.resolver,
            "max_records": self.max_records,
            "max_depth": self.max_depth,
            "follow": self.follow,
        }


def tuned_by(settings: BaseSettings) -> dict[str, Any]:
    """The config's fields only settings give (``-s`` on the command line, ``scrapy crawl -s``)."""
    from storage.capture.warc import WarcPolicy

    return {
        "check_state": settings.getfloat("PITH_CHECK_STATE"),
        "cross_check": max(0, settings.getint("PITH_CROSS_CHECK")),
        "recheck_after": timedelta(days=max(0.0, settings.getfloat("PITH_RECHECK_AFTER_DAYS"))),
        "commit_every": settings.getint("PITH_COMMIT_EVERY"),
        "warc": WarcPolicy(
            settings.getint("PITH_WARC_MAX_BYTES"),
            settings.getfloat("PITH_WARC_STALL_TIMEOUT"),
            settings.getint("PITH_WARC_QUEUE_BYTES"),
        )
        if settings.getbool("PITH_WARC") and settings.get("PITH_ARCHIVE")
        else None,
        "log_origin": settings.get("PITH_LOG_ORIGIN"),
        "worker": settings.get("PITH_WORKER"),
        "state_dir": settings.get("PITH_STATE_DIR"),
    }


def is_pith_crawl(crawler: Crawler) -> bool:
    """Whether the crawl's spider is the pith spider (or one made from it): Scrapy makes
    the spider before the extensions, middlewares and pipelines, so each can tell."""
    return isinstance(getattr(crawler.spider, "config", None), CrawlConfig)


def pith_crawl_only(crawler: Crawler) -> None:
    """NotConfigured unless the pith spider crawls: another spider of the same Scrapy
    project runs as if this project's components were not there."""
    if not is_pith_crawl(crawler):
        from scrapy.exceptions import NotConfigured  # inside a crawl: Scrapy is running

        raise NotConfigured(f"not the pith spider ({getattr(crawler.spider, 'name', None)!r})")


def crawl_config(crawler: Crawler) -> CrawlConfig:
    """The crawl's config, which its spider holds (built before any component);
    NotConfigured for another spider."""
    pith_crawl_only(crawler)
    return crawler.spider.config  # type: ignore[union-attr]  # the pith spider's


def as_list(value: object) -> list[str]:
    """A spider argument's list: a list from the command line, a string (commas or
    spaces between items) from ``scrapy crawl -a``."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [part for part in str(value).replace(",", " ").split() if part]


def as_bool(value: object) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
