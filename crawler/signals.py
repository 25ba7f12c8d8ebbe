"""Signals of our own."""

# the archive pipeline committed the crawl's final manifest
archive_committed = object()
# the frontier hands out tasks of a worker that died: the archive must first learn what
# that worker's checkpoints committed
frontier_recovered = object()
