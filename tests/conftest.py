"""Shared test fixtures live in tests/plugins/, one module per real service or area.

``slow`` marks what the fast subset (``pytest -m "not slow"``) leaves out: every test
that needs a test server of its own process (Redis, the S3 server; marked here, from
the fixtures it uses, so none can be forgotten), a real crawl, a served archive or a
daemon in a subprocess, or that takes more than about a second."""

import signal

import pytest

pytest_plugins = [
    "tests.plugins.core",
    "tests.plugins.s3",
    "tests.plugins.rclone",
    "tests.plugins.crawling",
    "tests.plugins.mirror",
    "tests.plugins.faults",
    "tests.plugins.redis",
    "tests.plugins.listener",
    "tests.plugins.nginx",
    "tests.plugins.peers",
]

# session fixtures that start a server process
SERVER_FIXTURES = {"redis_server", "s3_endpoint", "rclone_endpoint", "nginx"}


def pytest_collection_modifyitems(items):
    for item in items:
        if SERVER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    """The commands the tests start take Ctrl-C as from a terminal. A suite run as a
    background job (``cmd &``, ``nohup``) has SIGINT ignored, which its children would
    inherit and, as nohup asks, keep ignoring (``pith_archiver.interrupts``); runs in
    every xdist worker too."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
