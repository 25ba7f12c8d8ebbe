"""A crawl worker's name, as run ids (``storage.archive.layout``: 1-64 of [A-Za-z0-9_.]) and a
shared frontier's keys carry it."""

import os
import re
import socket

_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_.]")


def worker_name(name: str | None = None) -> str:
    """``name`` (PITH_WORKER; by default host.pid) with every character a run id cannot
    carry as ``_``, cut to 64."""
    return _NOT_IN_A_NAME.sub("_", name or f"{socket.gethostname()}.{os.getpid()}")[:64]
