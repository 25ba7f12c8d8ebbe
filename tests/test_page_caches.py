"""Every SQLite database a crawl keeps (the seen-set, the validators and those waiting
for their interim commit, the dedup history) holds its page cache to PAGE_CACHE_KIB, not
SQLite's 2 MiB: the tables outgrow either after a few thousand records, and what the
caches hold counts in the crawl's peak memory."""

from crawler.downloading.conditional import ConditionalRequestMiddleware
from crawler.scheduling.seen import SeenStore
from storage.archive import history
from storage.runtime.page_cache import PAGE_CACHE_KIB


def page_cache_kib(db) -> int:
    size = db.execute("PRAGMA cache_size").fetchone()[0]
    return -size if size < 0 else size * db.execute("PRAGMA page_size").fetchone()[0] // 1024


def test_the_crawls_databases_hold_their_page_caches_small(tmp_path):
    seen = SeenStore(str(tmp_path / "seen.sqlite3"))
    seen.open()
    validators = ConditionalRequestMiddleware(tmp_path / "validators.sqlite3", stats=None)
    caches = {
        "seen": page_cache_kib(seen.db),
        "validators": page_cache_kib(validators.db),
        "waiting validators": page_cache_kib(validators.waiting),
        "history": page_cache_kib(history.History().db),
    }
    seen.close()
    validators.close()
    assert caches == dict.fromkeys(caches, PAGE_CACHE_KIB)
    assert PAGE_CACHE_KIB < 2000  # SQLite's default
