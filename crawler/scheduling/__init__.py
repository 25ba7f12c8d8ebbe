"""Scheduling a crawl on one machine: the local scheduler, its seen-set on disk, the job
directory that survives a crash, and the claims every scheduler makes (``claims``, which
the shared frontier, ``crawler.frontier``, speaks too)."""
