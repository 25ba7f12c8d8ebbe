"""Naming a failed request for the log, the stats and the verifications table."""

from scrapy import Request
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
)
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure


def forbidden_by_robots(failure: Failure) -> bool:
    """A request robots.txt forbids: a policy, not a failure."""
    return bool(failure.check(IgnoreRequest)) and not failure.check(HttpError) and "robots" in str(failure.value)


def describe(failure: Failure) -> str:
    if isinstance(failure.value, HttpError):
        return f"HTTP {failure.value.response.status}"
    return f"{type(failure.value).__name__}: {failure.value}"


# why a source could not be reached, in the words a summary's last line uses
CAUSES = (
    (CannotResolveHostError, "name does not resolve"),
    (DownloadConnectionRefusedError, "connection refused"),
    (DownloadTimeoutError, "timed out"),
    (DownloadFailedError, "the download failed"),
)


def cause(exception: BaseException) -> str:
    """Why a download failed, in a few words: the kind of network error, or the
    exception itself when it is none of those Scrapy names."""
    named = next((words for kind, words in CAUSES if isinstance(exception, kind)), None)
    return named or f"{type(exception).__name__}: {exception}"


def failed_request(failure: Failure) -> Request:
    """The request an errback's failure is about (Scrapy sets it on the failure)."""
    request: Request = failure.request  # type: ignore[attr-defined]  # set by Scrapy, not declared by Twisted
    return request
