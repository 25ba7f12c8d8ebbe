"""The crawl's garbage collector threshold (crawler.extensions.collector): raised while the
engine runs, Python's own again after it, and left alone when switched off."""

import gc

import pytest
from scrapy import signals
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

import crawler.settings as project_settings
from crawler.extensions.collector import CollectorThreshold


def collectors(**overrides) -> tuple:
    """A crawler on the project's settings, and the collector extensions it loaded.
    No engine runs: the tests send its signals, so no reactor is needed."""
    settings = Settings()
    settings.setmodule(project_settings, priority="project")
    crawler = get_crawler(
        settings_dict={
            **settings.copy_to_dict(),
            "TWISTED_REACTOR_ENABLED": False,
            "MEMUSAGE_ENABLED": False,
            **overrides,
        }
    )
    return crawler, [e for e in crawler.extensions.middlewares if isinstance(e, CollectorThreshold)]


@pytest.fixture
def python_thresholds():
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_a_crawl_collects_young_objects_less_often_and_puts_it_back(python_thresholds):
    crawler, loaded = collectors()
    assert len(loaded) == 1  # on by default
    crawler.signals.send_catch_log(signals.engine_started)
    assert gc.get_threshold() == (10_000, *python_thresholds[1:])
    crawler.signals.send_catch_log(signals.engine_stopped)
    assert gc.get_threshold() == python_thresholds


@pytest.mark.parametrize("theirs", [50_000, 0])  # higher already, or the collector switched off
def test_the_process_s_own_threshold_is_kept_when_higher_or_off(python_thresholds, theirs):
    gc.set_threshold(theirs, *python_thresholds[1:])
    crawler, _ = collectors(PITH_GC_THRESHOLD=20_000)
    crawler.signals.send_catch_log(signals.engine_started)
    assert gc.get_threshold()[0] == theirs
    crawler.signals.send_catch_log(signals.engine_stopped)
    assert gc.get_threshold()[0] == theirs


def test_zero_keeps_pythons_collector(python_thresholds):
    crawler, loaded = collectors(PITH_GC_THRESHOLD=0)
    assert not loaded
    crawler.signals.send_catch_log(signals.engine_started)
    assert gc.get_threshold() == python_thresholds
