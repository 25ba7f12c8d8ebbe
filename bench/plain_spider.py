"""The baseline for bench_crawl.py: a plain Scrapy spider that fetches the given
bundle URLs and throws the bodies away. Run as ``python bench/plain_spider.py
URLS_FILE SETTINGS_JSON``; it exits after the last URL."""

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess


class PlainSpider(scrapy.Spider):
    name = "plain"

    def __init__(self, urls_file, **kwargs):
        super().__init__(**kwargs)
        self.urls_file = urls_file

    async def start(self):
        with open(self.urls_file) as handle:
            for line in handle:
                yield scrapy.Request(line.strip(), callback=self.parse)

    def parse(self, response):
        self.crawler.stats.inc_value("plain/bodies")


if __name__ == "__main__":
    process = CrawlerProcess(json.loads(sys.argv[2]))
    process.crawl(PlainSpider, urls_file=sys.argv[1])
    process.start()
