"""The claims every scheduler makes (crawler.scheduling.claims): one loop over the
records a response named, whatever ledger claims them, and what the spider may ask of
either scheduler."""

import pytest
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawler.frontier.scheduler import FrontierScheduler
from crawler.scheduling.claims import CLAIMED, FULL, SEEN, RecordScheduler, claim_found
from crawler.scheduling.local_scheduler import LocalScheduler
from crawler.scheduling.seen import BATCH, SeenStore
from crawler.stat_keys import Stat

A, B, C, D = (f"{letter * 26}" for letter in "ABCD")


@pytest.fixture
def seen(tmp_path):
    store = SeenStore(str(tmp_path / "seen.sqlite3"))
    store.open()
    yield store
    store.close()


def test_a_record_named_twice_is_claimed_once_and_past_the_limit_none(seen):
    stats = MemoryStatsCollector(get_crawler())
    found = [((A, 0), "a"), ((A, 0), "a again"), ((B, 1), "b"), ((C, 1), "c"), ((D, 1), "d")]
    assert claim_found(found, seen, 2, stats) == ["a", "b"]
    assert stats.get_value(Stat.RECORDS_FOUND) == 2
    assert stats.get_value(Stat.RECORDS_SKIPPED_MAX_RECORDS) == 2
    assert seen.take(10) == [(A, 0), (B, 1)]  # the seen-set queued what it claimed, at its depth
    assert seen.claim([A, C], 0, 2) == [(A, SEEN), (C, FULL)]


def test_no_stats_claims_all_the_same(seen):
    assert claim_found([((A, 0), None), ((B, 0), None)], seen, 0, None) == [None, None]
    assert seen.claim([A, C], 3) == [(A, SEEN), (C, CLAIMED)]


@pytest.mark.parametrize("scheduler", [LocalScheduler, FrontierScheduler])
def test_both_schedulers_answer_what_the_spider_asks(scheduler):
    """The sitemap walk stops at --max-records by asking the crawl's scheduler."""
    assert issubclass(scheduler, RecordScheduler)


def test_the_seen_set_claims_a_large_batch_in_a_few_statements_as_it_would_one_by_one(seen):
    """Past a lookup batch, records taken before (on either side of the batch's edge)
    stay SEEN, the new ones are queued in the order named, and the limit holds; in a
    handful of statements, not three a record (each would cost Scrapy's thread the GIL)."""
    suffixes = [f"{index:026d}" for index in range(BATCH * 2 + 200)]
    before = [suffixes[BATCH - 1], suffixes[BATCH], suffixes[-1]]
    seen.claim(before, 0)
    seen.take(10)
    statements = []
    seen.db.set_trace_callback(statements.append)
    verdicts = seen.claim([*suffixes, suffixes[0]], 2, limit=len(suffixes) - 1)
    seen.db.set_trace_callback(None)
    batches = -(-len(suffixes) // BATCH)
    assert len(statements) <= 3 * batches + 2, statements  # a look-up and two inserts a batch; one by one: 3,600
    assert [suffix for suffix, _ in verdicts] == suffixes  # each once, in order
    assert {suffix for suffix, verdict in verdicts if verdict == SEEN} == set(before)
    assert [suffix for suffix, verdict in verdicts if verdict == FULL] == [suffixes[-2]]  # the one past the limit
    new = [suffix for suffix in suffixes if suffix not in before][:-1]
    assert seen.take(len(suffixes)) == [(suffix, 2) for suffix in new]
    assert len(seen) == len(suffixes) - 1
