"""The crawl's performance knobs (pith_archiver.tuning) change nothing they do not own:
the root logger has the crawl's level only while the crawl runs. (The allocators:
tests/test_crawl_static.py; the collector's threshold: tests/test_collector.py.)"""

import logging

import pytest

from pith_archiver.tuning import root_log_level


@pytest.fixture
def root_level():
    before = logging.root.level
    yield
    logging.root.setLevel(before)


def test_the_root_logger_has_the_crawls_level_while_it_runs_and_its_own_after(root_level):
    logging.root.setLevel(logging.NOTSET)
    with root_log_level("INFO"):
        assert not logging.getLogger("tests.tuning.a_scrapy_like_logger").isEnabledFor(logging.DEBUG)
    assert logging.root.level == logging.NOTSET
    with pytest.raises(KeyboardInterrupt), root_log_level("DEBUG"):
        assert logging.root.level == logging.DEBUG
        raise KeyboardInterrupt
    assert logging.root.level == logging.NOTSET
