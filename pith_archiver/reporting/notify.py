"""``--notify URL``: POST one JSON summary of a job when it ends (a chat webhook, an
alerting relay, a ticket system). Delivery is tried a few times, each attempt and all
of them together within a deadline however the receiver behaves (``side_request``),
and never changes the job's exit status: what could not be delivered is one warning line.
"""

import json
import time
import urllib.request
from collections.abc import Iterable

from pith.shipped import version
from storage.runtime.deadline_http import NoAnswer, exchange

from .job_summary import JobSummary
from .side_request import SideRequestBudget

ATTEMPTS = 3
BACKOFF = 1.0  # seconds before the second attempt, doubled each time
RETRIED_STATUSES = (408, 429, 500, 502, 503, 504)


def deliver(url: str, body: bytes, budget: SideRequestBudget, attempts: int = ATTEMPTS) -> str | None:
    """POST ``body`` to ``url``; None once delivered (a 2xx), else why not."""
    request = urllib.request.Request(  # noqa: S310 - job_hooks accepts only http(s) --notify URLs
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": f"pith-archiver/{version()}"},
    )
    why = "not tried"
    for attempt in range(attempts):
        if attempt:
            time.sleep(min(BACKOFF * 2 ** (attempt - 1), budget.left()))
        seconds = budget.next_attempt()
        if not seconds:
            return f"{why}; {budget.spent()}"
        try:
            status = exchange(request, seconds).status
        except NoAnswer as exc:
            why = str(exc)
            continue
        if 200 <= status < 300:
            return None
        why = f"HTTP {status}"
        if status not in RETRIED_STATUSES:
            return why
    return f"{why} after {attempts} attempts"


def notify(urls: Iterable[str], summary: JobSummary, budget: SideRequestBudget) -> list[str]:
    """Send the summary to every URL; the warning lines of those not delivered."""
    body = json.dumps(summary.as_dict(), sort_keys=True).encode()
    return [
        f"warning: --notify {url}: the job summary was not delivered ({why}); the exit status is unchanged"
        for url in urls
        if (why := deliver(url, body, budget)) is not None
    ]
