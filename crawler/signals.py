"""Signals of our own: sent by the archive pipeline once a manifest is committed."""

archive_committed = object()
