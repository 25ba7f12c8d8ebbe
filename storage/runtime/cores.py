"""The one core counter: how many processes the work of a command may keep busy. Its own
module, so that ``verify`` and ``serve`` count cores without importing the verifier
worker (and the archive writer's rows it brings): start-up is part of verifying a few
bundles."""

import os


def available_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    counter = getattr(os, "process_cpu_count", None)
    if counter is not None:
        return counter() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
