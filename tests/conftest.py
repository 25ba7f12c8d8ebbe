"""Shared test fixtures live in tests/plugins/, one module per real service or area."""

pytest_plugins = [
    "tests.plugins.core",
    "tests.plugins.s3",
    "tests.plugins.crawling",
    "tests.plugins.mirror",
    "tests.plugins.faults",
    "tests.plugins.redis",
    "tests.plugins.listener",
]
