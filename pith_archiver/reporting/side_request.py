"""The time the HTTP requests a job makes beside its work (``--notify``,
``--pushgateway``) may take together.

Each request is one exchange within its own deadline (``storage.runtime.deadline_http``), of
which only the status line and headers are waited for: a body, however large or slow,
is never read. Together the side requests of a job have a budget
(``SideRequestBudget``), so a job with several of them, retries included, still ends
in bounded time.
"""

import os
import time

ATTEMPT_SECONDS = 10.0  # one request, from the name lookup to the answer's headers
BUDGET_SECONDS = 40.0  # every side request of a job together, retries and their pauses included
BUDGET_VARIABLE = "PITH_ARCHIVER_SIDE_REQUEST_SECONDS"  # overrides BUDGET_SECONDS (a shorter wait in tests)


class SideRequestBudget:
    """The seconds left for a job's side requests; each attempt gets at most
    ``ATTEMPT_SECONDS`` of them."""

    def __init__(self, seconds: float | None = None) -> None:
        if seconds is None:
            seconds = float(os.environ.get(BUDGET_VARIABLE) or BUDGET_SECONDS)
        self.seconds = seconds
        self.attempt_seconds = min(ATTEMPT_SECONDS, seconds / 3)  # room for a first retry, at least
        self.ends = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.ends - time.monotonic())

    def next_attempt(self) -> float:
        """Seconds the next attempt may take (0: no time left for one)."""
        return min(self.attempt_seconds, self.left())

    def spent(self) -> str:
        return f"the {self.seconds:g} s all side requests of a job may take are spent"
