"""Verifying what the crawl fetched: the verifier (worker processes, or the crawl's own
thread), what each worker process runs, and every answer bound to its question."""
