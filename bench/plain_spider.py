"""The baseline for bench_crawl.py: a bare Scrapy spider that fetches the given bundle
URLs and throws the bodies away. Run as ``python bench/plain_spider.py URLS_FILE
SETTINGS_JSON REPORT_JSON`` from a folder outside any Scrapy project; it exits after
the last URL and writes REPORT_JSON: the bodies it received and what it ran under
(whether Scrapy saw a project, the bot name), so the bench can check that the
baseline ran with the settings it was given and none of the checkout's.

It pays no cost the crawl avoids: besides the crawl's transport settings (given by the
bench), it runs under the crawl's process knobs (``pith_archiver.crawl.tuning``: the malloc
arenas capped, the root logger at LOG_LEVEL) and, with ``PLAIN_JSON_CHARSET`` set (a
server that compresses), declares UTF-8 on JSON as the crawl does (``json_charset``).

With ``PLAIN_ITEM_PIPELINES`` set to N (bench/item_path.py), its callback yields each
body as an item, carried through N pipelines that pass it on (the last a coroutine, as
the crawl's archive stage): what Scrapy's item path costs by itself."""

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import inside_project

from pith_archiver.crawl import tuning


def json_charset() -> type:
    """The crawl's JSON charset middleware, in a spider that is not the crawl's (which
    it otherwise stays out of). Scrapy guesses a charset only on a body it decompressed,
    so the bench asks for it only from a server that compresses: its module brings the
    crawl's config with it (2.4 MiB)."""
    from crawler.downloading.json_charset import JsonCharsetMiddleware

    class JsonCharset(JsonCharsetMiddleware):
        @classmethod
        def from_crawler(cls, crawler) -> "JsonCharset":
            return cls()

    return JsonCharset


class PassOn:
    """An item pipeline that does nothing to the item."""

    def process_item(self, item):
        return item


class AwaitedPassOn:
    """The same, a coroutine, as the crawl's archive stage is."""

    async def process_item(self, item):
        return item


def passing_on(pipelines: int) -> dict:
    """ITEM_PIPELINES of ``pipelines`` distinct stages, the last a coroutine (the crawl's
    pipelines: two plain stages, then the archive's, awaited)."""
    stages = [type(f"PassOn{i}", (PassOn,), {}) for i in range(pipelines - 1)]
    stages += [AwaitedPassOn] if pipelines else []
    return {stage: 100 + i for i, stage in enumerate(stages)}


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

    def summary(self) -> dict:
        """What the report says: the bodies received and what the spider ran under."""
        return {
            "bodies": self.crawler.stats.get_value("plain/bodies", 0),
            "inside_project": inside_project(),
            "bot_name": self.crawler.settings["BOT_NAME"],
        }

    def closed(self, reason):
        with open(self.report, "w") as handle:
            json.dump(self.summary(), handle)


class ItemSpider(PlainSpider):
    """The same, its callback yielding each body as an item."""

    def parse(self, response):
        self.crawler.stats.inc_value("plain/bodies")
        return [{"url": response.url, "body": response.body}]


if __name__ == "__main__":
    tuning.economise()  # before anything allocates, as the crawl's entry does
    settings = json.loads(sys.argv[2])
    if settings.pop("PLAIN_JSON_CHARSET", False):
        settings["DOWNLOADER_MIDDLEWARES"] = {json_charset(): 595}  # where the crawl has it
    pipelines = settings.pop("PLAIN_ITEM_PIPELINES", 0)
    if pipelines:
        settings["ITEM_PIPELINES"] = passing_on(pipelines)
    process = CrawlerProcess(settings)
    process.crawl(ItemSpider if pipelines else PlainSpider, urls_file=sys.argv[1], report=sys.argv[3])
    with tuning.root_log_level(process.settings.get("LOG_LEVEL")):
        process.start()
