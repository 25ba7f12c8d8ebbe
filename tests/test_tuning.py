"""The crawl's performance knobs (pith_archiver.crawl.tuning) change nothing they do not own:
the root logger has the crawl's level only while the crawl runs, and pandas stays out
of a crawl's process. (The allocators:
tests/test_crawl_static.py; the collector's threshold: tests/test_collector.py.)"""

import importlib.util
import logging
import subprocess
import sys

import pytest
from scrapy.utils.log import DEFAULT_LOGGING

from pith_archiver.crawl.tuning import root_log_level


@pytest.fixture
def root_level():
    scrapy = logging.getLogger("scrapy")
    before = logging.root.level, scrapy.level
    yield
    logging.root.setLevel(before[0])
    scrapy.setLevel(before[1])


def test_the_root_logger_has_the_crawls_level_while_it_runs_and_its_own_after(root_level):
    logging.root.setLevel(logging.NOTSET)
    with root_log_level("INFO"):
        assert not logging.getLogger("tests.tuning.a_scrapy_like_logger").isEnabledFor(logging.DEBUG)
    assert logging.root.level == logging.NOTSET
    with pytest.raises(KeyboardInterrupt), root_log_level("DEBUG"):
        assert logging.root.level == logging.DEBUG
        raise KeyboardInterrupt
    assert logging.root.level == logging.NOTSET


def test_scrapys_own_loggers_have_the_crawls_level_while_it_runs_and_their_own_after(root_level):
    """Scrapy's logging configuration sets its own logger to DEBUG, so without the knob
    each response's "Crawled" and each item's "Scraped from" record would be built."""
    logging.getLogger("scrapy").setLevel(DEFAULT_LOGGING["loggers"]["scrapy"]["level"])  # as Scrapy configures it
    scraper = logging.getLogger("scrapy.core.scraper")
    assert scraper.isEnabledFor(logging.DEBUG)
    with root_log_level("INFO"):
        assert not scraper.isEnabledFor(logging.DEBUG)
        assert scraper.isEnabledFor(logging.INFO)
    assert scraper.isEnabledFor(logging.DEBUG)


def test_a_crawl_keeps_numpy_pandas_and_remote_filesystems_out_of_pyarrow(tmp_path):
    """pyarrow imports numpy, and pandas on its first conversion, when they are
    installed (the test environment has both, for the release readers): a crawl's
    process writes and reads its Parquet without them, and importing either there
    fails as if it were not installed."""
    for name in ("numpy", "pandas"):
        assert importlib.util.find_spec(name) is not None, f"the test environment installs {name} (datasets)"
    code = f"""
import sys
from pith_archiver.crawl.tuning import without_unused_libraries
without_unused_libraries()
import pyarrow as pa, pyarrow.parquet as pq
table = pa.Table.from_pylist([{{"n": 1, "s": "x"}}])
pq.write_table(table, {str(tmp_path / "t.parquet")!r})
assert pq.read_table({str(tmp_path / "t.parquet")!r}).to_pylist() == [{{"n": 1, "s": "x"}}]
try:
    import pandas
except ModuleNotFoundError as exc:
    print("refused:", exc)
import pyarrow.fs
print("numpy" in sys.modules, "pandas" in sys.modules, "pyarrow._s3fs" in sys.modules, pyarrow.fs.LocalFileSystem)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "refused: No module named 'pandas' (kept out of a crawl)",
        "False False False <class 'pyarrow._fs.LocalFileSystem'>",
    ]
    code = (
        "import sys, pyarrow as pa, pyarrow.parquet; pa.array([1]);"
        " print('numpy' in sys.modules, 'pandas' in sys.modules, 'pyarrow._s3fs' in sys.modules)"
    )
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert plain.stdout == "True True True\n", plain.stderr  # what it saves: pyarrow alone imports them
