"""Naming a failed request for the log, the stats and the verifications table."""

from scrapy.exceptions import IgnoreRequest
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure


def forbidden_by_robots(failure: Failure) -> bool:
    """A request robots.txt forbids: a policy, not a failure."""
    return bool(failure.check(IgnoreRequest)) and not failure.check(HttpError) and "robots" in str(failure.value)


def describe(failure: Failure) -> str:
    if isinstance(failure.value, HttpError):
        return f"HTTP {failure.value.response.status}"
    return f"{type(failure.value).__name__}: {failure.value}"
