"""A job's Prometheus metrics: a text file for node_exporter's textfile collector
(``--metrics-file``, written whole and renamed into place, so a scrape never reads half
of it) and a push to a Pushgateway (``--pushgateway``), within the deadline of a side
request (``side_request``) however the gateway behaves.

Every sample is labelled by ``command`` and ``archive``. ``last_success_timestamp_seconds``
is when a job last finished with a commit (exit 0, 1 or 3): a job that did not keeps
the value of the file it replaces, so "no success for a day" stays an alert rule.
"""

import logging
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, pushadd_to_gateway, write_to_textfile
from prometheus_client.parser import text_string_to_metric_families

from storage.runtime.deadline_http import exchange

from ..exit_status import ConfigError
from .job_summary import JobSummary
from .side_request import SideRequestBudget

logger = logging.getLogger(__name__)

PREFIX = "pith_archiver"
PUSHGATEWAY_JOB = "pith-archiver"  # the Pushgateway's ``job`` label: Prometheus's word, one value for every job
LABELS = ("command", "archive")
KEPT = ("exit_status", "last_success_timestamp_seconds")  # carried over from the file a job replaces


def check_metrics_file(path: str) -> None:
    """The file's folder takes a new file (probed): an unwritable path stops the job
    before it starts, not after the work is done."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"--metrics-file {path}: is a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=target.absolute().parent, prefix=f".{target.name}.probe-"):
            pass
    except OSError as exc:
        raise ConfigError(f"--metrics-file {path}: {exc.strerror or exc}") from None


def previous_values(path: str | None) -> dict[str, float]:
    """The KEPT samples of the metrics file a job is about to replace (none if unreadable)."""
    try:
        text = Path(path).read_text("utf-8") if path else ""
        families = list(text_string_to_metric_families(text))
    except (OSError, ValueError) as exc:
        logger.warning("metrics file %s not read: %s", path, exc)
        return {}
    wanted = {f"{PREFIX}_{name}": name for name in KEPT}
    return {wanted[s.name]: s.value for family in families for s in family.samples if s.name in wanted}


def registry_for(summary: JobSummary, previous: dict[str, float]) -> CollectorRegistry:
    """The job's metrics. While a crawl goes on (an interim commit: no status yet) the exit
    status is the last finished job's, and ``run_in_progress`` is 1."""
    registry = CollectorRegistry()
    labels = {"command": summary.command, "archive": summary.archive}

    def gauge(name: str, doc: str, value: float | None) -> None:
        metric = Gauge(f"{PREFIX}_{name}", doc, LABELS, registry=registry)
        if value is not None:  # else the family is declared with no sample
            metric.labels(**labels).set(value)

    gauge("records_archived", "Bundles archived new (audit: checked; export: versions exported).", summary.archived)
    gauge("records_unchanged", "Records found unchanged or already archived.", summary.unchanged)
    gauge("records_failed", "Records that could not be fetched after retries and mirrors.", summary.failed)
    rejected = Gauge(
        f"{PREFIX}_records_rejected",
        "Bundles rejected, by reason (audit: discrepancies by code).",
        [*LABELS, "reason"],
        registry=registry,
    )
    for reason, count in sorted(summary.rejected.items()):
        rejected.labels(**labels, reason=reason).set(count)
    requests = Counter(f"{PREFIX}_requests", "HTTP requests the job made.", LABELS, registry=registry)
    requests.labels(**labels).inc(summary.requests)
    # "run" in these two names means the job: kept for the dashboards and alert rules that use them
    gauge("run_duration_seconds", "Wall time of the job (so far, while it goes on).", summary.duration)
    gauge(
        "run_in_progress",
        "1 at an interim commit of a crawl that goes on, 0 when the job ended.",
        summary.status is None,
    )
    status = previous.get("exit_status") if summary.status is None else int(summary.status)
    gauge("exit_status", "The exit status of the last finished job (see --help).", status)
    success = summary.finished if summary.succeeded else previous.get("last_success_timestamp_seconds")
    gauge("last_success_timestamp_seconds", "When a job last finished with a commit (exit 0, 1 or 3).", success)
    return registry


def write_metrics(path: str, summary: JobSummary) -> None:
    """Write the file whole, then rename it into place (prometheus_client does both)."""
    write_to_textfile(path, registry_for(summary, previous_values(path)))


def push_metrics(url: str, summary: JobSummary, previous: dict[str, float], budget: SideRequestBudget) -> None:
    """POST to the Pushgateway (it replaces the metrics of these names in the group, so
    a last success this job does not report stays there), once."""
    seconds = budget.next_attempt()
    if not seconds:
        raise TimeoutError(budget.spent())
    pushadd_to_gateway(
        url,
        job=PUSHGATEWAY_JOB,
        registry=registry_for(summary, previous),
        grouping_key={"command": summary.command, "archive": summary.archive},
        timeout=seconds,
        handler=_within_deadline,
    )


def _within_deadline(
    url: str, method: str, timeout: float, headers: Sequence[tuple[str, str]], data: bytes
) -> Callable[[], None]:
    """prometheus_client's request handler, with ``timeout`` the deadline of the whole
    exchange (its own bounds each socket read); an error status raises, as its own does."""

    def handle() -> None:
        request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))  # noqa: S310 - job_hooks accepts only http(s) --pushgateway URLs
        status = exchange(request, timeout).status
        if not 200 <= status < 300:
            raise OSError(f"the Pushgateway answered HTTP {status}")

    return handle
