"""Naming a failed request for the log, the stats and the verifications table."""

from scrapy import Request
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


def failed_request(failure: Failure) -> Request:
    """The request an errback's failure is about (Scrapy sets it on the failure)."""
    request: Request = failure.request  # type: ignore[attr-defined]  # set by Scrapy, not declared by Twisted
    return request
