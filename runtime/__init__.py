"""Process plumbing below storage and the crawler: watched child processes spoken to in
length-framed messages, and the page cache size of the crawl's SQLite databases."""
