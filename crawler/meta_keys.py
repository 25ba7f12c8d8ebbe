"""The keys this crawl's components put in ``Request.meta``, in one place: a request
carries its record, its depth and its task from the spider through the middlewares,
the schedulers and back to its callbacks, and each reader names the key from here."""

import time
from typing import Final

from scrapy import Request


class Meta:
    SUFFIX: Final = "pith_suffix"  # the record a bundle request is for
    OPENS_RECORD: Final = "pith_opens_record"  # a record found: its scheduler claims it (first request only)
    DEPTH: Final = "pith_depth"  # link depth from the seeds (--max-depth)
    TASK: Final = "pith_task"  # the frontier task the request opens or continues (crawler.frontier)
    TRIED: Final = "pith_tried"  # sources a record's bundle was requested from, the current one last
    TEMPLATE: Final = "pith_template"  # which URL template built it, to learn a redirect from
    CONDITIONAL: Final = "pith_conditional"  # send the archived validators (crawler.downloading.conditional)
    ALIAS: Final = "pith_alias"  # an alias seed's alias
    BUNDLE_FAILED: Final = "pith_bundle_failed"  # a page requested after its record's bundle failed
    CROSS_CHECK: Final = "pith_cross_check"  # a copy fetched to compare sources (crawler.spider_mixins.cross_check)
    EXPECTED_STATE: Final = "pith_expected_state"  # what a state.json must match (crawler.spider_mixins.state_check)
    DEADLINE: Final = "pith_deadline"  # time.monotonic() when a request and retries end (crawler.downloading.robots)


def take_opening(request: Request) -> tuple[str, int] | None:
    """``(suffix, depth)`` when ``request`` opens a record found in a response (and
    unmark it: its retries and fallbacks continue the record, they do not open it)."""
    if not request.meta.pop(Meta.OPENS_RECORD, False):
        return None
    return request.meta[Meta.SUFFIX], request.meta.get(Meta.DEPTH, 0)


def time_left(request: Request) -> float | None:
    """Seconds left before ``request``'s deadline (``Meta.DEADLINE``); None without one."""
    deadline = request.meta.get(Meta.DEADLINE)
    return None if deadline is None else deadline - time.monotonic()
