"""Pith protocol core: canonical JSON, safe parsing, keys, the deterministic merge
and bundle verification. Imports nothing from Scrapy, so the CLI, the pipelines,
the mirror and the audit all share one code path."""
