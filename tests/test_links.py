"""Finding records in what a resolver sends (``suffixes_in``): the format's two shapes,
``pith:NNNN:<SUFFIX>`` and ``/pith/<SUFFIX>``, wherever they are, and nothing else; a
response opens the other records it names, not its own again; and the spider's
generator callbacks return no value, the check Scrapy would repeat on most responses
if the crawl did not leave it to this test."""

import inspect
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.utils.misc import is_generator_with_return_value
from scrapy.utils.test import get_crawler

from crawler.crawl_config import CrawlConfig
from crawler.links import suffixes_in
from crawler.meta_keys import Meta
from crawler.seeds import SeedList
from crawler.spiders.pith import PithSpider
from pith_archiver import FIXTURES

# the two shapes as the format names them, one alternative each
DEFINED = re.compile(rb"(?:pith:\d{4}:|/pith/)([A-Z2-7]{26})(?![A-Z2-7])")
SUFFIX = "RLLQL6357CWNZYHNBMCYD3UK5B"
PIECES = ["pith", "/pith/", "pith:", "pith:2026:", "2026", ":", "/", "x", " ", SUFFIX, SUFFIX[:25], "A", "7", "é"]


def defined(body: bytes) -> list[str]:
    return list(dict.fromkeys(m.decode("ascii") for m in DEFINED.findall(body)))


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_every_text_gives_the_records_the_format_defines(pieces):
    body = "".join(pieces).encode()
    assert suffixes_in(body) == defined(body)


def test_the_real_bundles_and_record_page_name_the_records_the_format_defines():
    files = sorted(FIXTURES.glob("*.bundle.json")) + sorted(FIXTURES.glob("*.page.txt"))
    assert len(files) >= 4
    for path in files:
        body = path.read_bytes()
        assert suffixes_in(body) == defined(body), path.name
    assert SUFFIX in suffixes_in((FIXTURES / f"{SUFFIX}.bundle.json").read_bytes())


def test_each_shape_is_found_and_near_misses_are_not():
    other = "X4GAYROCRDRF6GSWIGUEQCY32W"
    text = f"see pith:2026:{SUFFIX} and <a href='/pith/{other}/bundle.json'>, again /pith/{SUFFIX}"
    assert suffixes_in(text.encode()) == [SUFFIX, other]
    near_misses = [
        f"xpith/{SUFFIX}",  # no slash before pith
        f"pith:26:{SUFFIX}",  # a year of two digits
        f"/pith/{SUFFIX}A",  # 27 characters: not a suffix
        f"/pith/{SUFFIX[:25]}",  # 25
        f"/PITH/{SUFFIX}",
        f"pith/{SUFFIX}",
    ]
    for text in near_misses:
        assert suffixes_in(text.encode()) == [], text


def test_a_response_opens_the_other_records_it_names_not_its_own():
    spider = PithSpider(CrawlConfig(SeedList([SUFFIX]), "http://127.0.0.1:1"))
    spider.crawler = get_crawler(PithSpider)
    other = "X4GAYROCRDRF6GSWIGUEQCY32W"
    page = (FIXTURES / f"{SUFFIX}.page.txt").read_bytes() + f'<a href="/pith/{other}">cited</a>'.encode()

    def opened(body: bytes, own: str | None) -> list[tuple[str, int]]:
        requests = list(spider.records_in(body, 2, own))
        assert all(request.meta[Meta.OPENS_RECORD] for request in requests)
        return [(request.meta[Meta.SUFFIX], request.meta[Meta.DEPTH]) for request in requests]

    assert opened(page, SUFFIX) == [(other, 2)]
    assert opened(page, None) == [(SUFFIX, 2), (other, 2)]  # a manifest, which is no record's
    assert opened((FIXTURES / f"{SUFFIX}.bundle.json").read_bytes(), SUFFIX) == []


def test_the_spiders_generator_callbacks_return_no_value():
    methods = inspect.getmembers(PithSpider, inspect.isfunction)
    generators = [name for name, member in methods if inspect.isgeneratorfunction(member)]
    assert "parse_page" in generators  # the check sees the callbacks it is for
    assert [name for name in generators if is_generator_with_return_value(getattr(PithSpider, name))] == []
