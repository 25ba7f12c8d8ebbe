"""The baseline for bench_crawl.py: a bare Scrapy spider that fetches the given bundle
URLs and throws the bodies away. Run as ``python bench/plain_spider.py URLS_FILE
SETTINGS_JSON REPORT_JSON`` from a folder outside any Scrapy project; it exits after
the last URL and writes REPORT_JSON: the bodies it received and what it ran under
(whether Scrapy saw a project, the bot name), so the bench can check that the
baseline ran with the settings it was given and none of the checkout's."""

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import inside_project


class PlainSpider(scrapy.Spider):
    name = "plain"

    def __init__(self, urls_file, report, **kwargs):
        super().__init__(**kwargs)
        self.urls_file = urls_file
        self.report = report

    async def start(self):
        with open(self.urls_file) as handle:
            for line in handle:
                yield scrapy.Request(line.strip(), callback=self.parse)

    def parse(self, response):
        self.crawler.stats.inc_value("plain/bodies")

    def closed(self, reason):
        with open(self.report, "w") as handle:
            json.dump(
                {
                    "bodies": self.crawler.stats.get_value("plain/bodies", 0),
                    "inside_project": inside_project(),
                    "bot_name": self.crawler.settings["BOT_NAME"],
                },
                handle,
            )


if __name__ == "__main__":
    process = CrawlerProcess(json.loads(sys.argv[2]))
    process.crawl(PlainSpider, urls_file=sys.argv[1], report=sys.argv[3])
    process.start()
