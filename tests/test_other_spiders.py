"""Good neighbours in a Scrapy project: a checkout's ``scrapy.cfg`` gives every spider
run there this project's settings, and with them its pipelines, extensions and
middlewares. Each stays out of a crawl that is not the pith spider's."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.cli import isolated_home
from tests.test_unattended import REAL

ROOT = Path(__file__).parents[1]

OTHER_SPIDER = '''
import scrapy


class Titles(scrapy.Spider):
    """Someone else's spider: reads a mirror's home page and one bundle, and yields plain dicts."""

    name = "titles"

    async def start(self):
        yield scrapy.Request(self.base + "/")
        yield scrapy.Request(self.base + "/pith/" + self.record + "/bundle.json", callback=self.bundle)
        yield scrapy.Request("http://elsewhere.invalid/", callback=self.bundle)  # off site: filtered

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}

    def bundle(self, response):
        yield {"url": response.url, "pith_number": response.json()["pith_number"]}
'''


@pytest.mark.slow
def test_a_plain_spider_runs_with_scrapy_runspider_in_a_checkout(tmp_path, mirror):
    server = mirror()
    shutil.copy2(ROOT / "scrapy.cfg", tmp_path / "scrapy.cfg")  # as in a checkout: the project's settings apply
    (tmp_path / "titles.py").write_text(OTHER_SPIDER)
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "runspider", "titles.py", "-a", f"base={server.url}", "-a", f"record={REAL}"]
        + ["-a", "allowed_domains=127.0.0.1", "-o", "items.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **isolated_home(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'BOT_NAME': 'pith-archiver'" in proc.stderr  # it did run under this project's settings
    assert "Traceback" not in proc.stderr and " ERROR: " not in proc.stderr, proc.stderr[-3000:]
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(item["url"] for item in items) == [f"{server.url}/", f"{server.url}/pith/{REAL}/bundle.json"]
    assert [item["pith_number"].rsplit(":", 1)[1] for item in items if "pith_number" in item] == [REAL]
    assert "'offsite/filtered': 1" in proc.stderr  # Scrapy's own offsite filter, which this project's replaces
    assert not (tmp_path / "archive").exists() and not (tmp_path / "config").exists()  # nothing archived, no key made
    assert "pith/" not in proc.stderr.split("Dumping Scrapy stats:", 1)[1]  # none of this project's counters
