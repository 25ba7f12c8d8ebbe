"""The page cache of each SQLite database a crawl keeps (its seen-set, its validators,
the archive's dedup history): SQLite's default, 2 MiB each, fills by a few thousand
records (4-7 MiB of a 10k crawl's peak, bench/RESULTS.md); the files are on disk and
the operating system caches their pages besides. Its own module, so the crawl's
scheduler reads it without importing pyarrow."""

PAGE_CACHE_KIB = 256
