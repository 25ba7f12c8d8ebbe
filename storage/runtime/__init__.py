"""Process plumbing below storage and the crawler: watched child processes spoken to in
length-framed messages, the page cache size of the crawl's SQLite databases, and HTTP
exchanges outside the crawl, each within one deadline."""
