"""Downloading: Scrapy's downloader with its per-host cap, the downloader middlewares
(one concern a module: polite retries, conditional re-fetching, UTF-8 JSON, requests
kept on the crawl's hosts, robots.txt to a deadline), the spread of bundle requests
over the sources, and the WARC recorder that hands every exchange, as received, to
the crawl's WARC writer."""
