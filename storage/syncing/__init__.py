"""Copying a peer archive through its signed logs (``crawl --from-archive``)."""
