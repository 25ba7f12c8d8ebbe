"""The crawl's web-archive capture: WARC files (written by a child process), their CDXJ
indexes and ``captures`` rows, checking them, and WACZ packages of them."""
