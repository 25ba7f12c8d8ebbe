"""What a crawl is given, built and checked once.

``pith-archiver crawl`` builds it from its options, each mistake one line before the
first request, and hands it to the spider (``config=``); ``scrapy crawl pith`` and
Scrapyd build it from the string settings and spider arguments when the spider is
made. The spider, its verifier, the signing-key watch and the archive pipeline all
read this one object (``crawl_config(crawler)``) instead of parsing settings again.

The project's settings reach every spider run in a checkout (``scrapy.cfg``), the
``scrapy runspider`` of someone else's spider too: each of the project's pipelines,
extensions and middlewares asks ``pith_crawl_only(crawler)`` first, and stays out
(NotConfigured) of a crawl whose spider holds no CrawlConfig.
"""

from dataclasses import dataclass

from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from pith.keyring import ARCHIVE, Keyring, KeyringError
from pith.signing import Signer
from storage.archive.signing_key import load_or_create
from storage.archive.stores import ObjectStore, open_store

from .seeds import SeedList


@dataclass(frozen=True)
class CrawlConfig:
    seeds: SeedList
    keyring: Keyring  # verifies the bundles (PITH_KEYRINGS, PITH_DEFAULT_KEYS)
    archive_keyring: Keyring  # the other workers' archiver keys (PITH_ARCHIVE_KEYRINGS)
    store: ObjectStore | None = None  # the archive (PITH_ARCHIVE, AWS_ENDPOINT_URL); None: archive nothing
    signer: Signer | None = None  # signs what the crawl commits (PITH_SIGNING_KEY)

    @classmethod
    def from_settings(cls, settings: BaseSettings, seeds: SeedList) -> "CrawlConfig":
        """From Scrapy's settings and the spider's seeds. KeyringError or ValueError (a
        store location) for what cannot work."""
        keyring = Keyring.build(settings.getlist("PITH_KEYRINGS"), settings.getbool("PITH_DEFAULT_KEYS"))
        if not len(keyring):  # a crawl without its verifier would archive nothing (or worse)
            raise KeyringError("the keyring is empty: nothing could verify (PITH_KEYRINGS, PITH_DEFAULT_KEYS)")
        archive = settings.get("PITH_ARCHIVE")
        return cls(
            seeds=seeds,
            keyring=keyring,
            archive_keyring=Keyring.build(settings.getlist("PITH_ARCHIVE_KEYRINGS"), default_keys=False, role=ARCHIVE),
            store=open_store(archive, endpoint_url=settings.get("AWS_ENDPOINT_URL")) if archive else None,
            signer=load_or_create(settings.get("PITH_SIGNING_KEY")) if archive else None,
        )


def is_pith_crawl(crawler: Crawler) -> bool:
    """Whether the crawl's spider is the pith spider (or one made from it): Scrapy makes
    the spider before the extensions, middlewares and pipelines, so each can tell."""
    return isinstance(getattr(crawler.spider, "config", None), CrawlConfig)


def pith_crawl_only(crawler: Crawler) -> None:
    """NotConfigured unless the pith spider crawls: another spider of the same Scrapy
    project runs as if this project's components were not there."""
    if not is_pith_crawl(crawler):
        raise NotConfigured(f"not the pith spider ({getattr(crawler.spider, 'name', None)!r})")


def crawl_config(crawler: Crawler) -> CrawlConfig:
    """The crawl's config, which its spider holds (built before any pipeline);
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
