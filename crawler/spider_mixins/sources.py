"""The sources a crawl fetches records from: the resolver, then its mirrors (``--mirror``,
and those its mirror list names with ``--mirrors-from-registry``), over which the bundle
requests are spread (``crawler.downloading.spread``); and the ports of their hosts the
crawl may reach (a spider mixin of ``pith``)."""

from urllib.parse import urlsplit

from scrapy.crawler import Crawler

from ..downloading.spread import SourcePool
from ..links import ResolverUrls, port_of


class RecordSources:
    """A mixin of the spider: what it needs of it is declared here."""

    crawler: Crawler
    resolver: ResolverUrls
    mirrors: list[str]  # in the order they were named or learnt
    allow_hosts: set[str]  # --allow-host
    allowed_domains: list[str]
    pool: SourcePool
    unspread: int  # record bundle requests still to send to the resolver: the --cross-check sample

    @property
    def sources(self) -> list[str]:
        """The base URLs records are fetched from: the resolver, then its mirrors."""
        return [self.resolver.base, *self.mirrors]

    def allows_port(self, host: str, port: int) -> bool:
        """Of the crawl's hosts, one named by ``--allow-host`` may be fetched on any
        port; one named by the resolver or a mirror only on their ports: a service on
        another port of the same machine is not part of the crawl."""
        if host in self.allow_hosts:
            return True
        return any(parts.hostname == host and port_of(parts) == port for parts in map(urlsplit, self.sources))

    def source(self) -> str:
        """Where a record's bundle request goes: the resolver for the --cross-check sample
        (whose copies the other sources' are compared with), else the pool's pick."""
        if self.unspread > 0:
            self.unspread -= 1
            return self.pool.take(self.resolver.base)
        return self.pool.pick() or self.resolver.base  # every source demoted: the resolver

    def add_mirror(self, base: str) -> None:
        """A mirror the bundle requests are spread over from now on."""
        if base != self.resolver.base and base not in self.mirrors:
            self.mirrors.append(base)
            self.pool.add(base)
            host = urlsplit(base).hostname
            if host is not None and host not in self.allowed_domains:
                self.allowed_domains = sorted({*self.allowed_domains, host})

    def count_sources(self) -> None:
        self.pool.join(self.crawler)

    def version_refused(self, url: str, relation: str) -> None:
        """The archive refused a verified copy from ``url``: stale or forked from the
        version it holds (``relation``)."""
        self.pool.judged(url, relation)
