"""What a job (one invocation of ``crawl``, ``audit`` or ``export``, as cron or systemd
starts it) tells the machines watching it when it ends: ``--metrics-file``,
``--pushgateway`` and ``--notify``, shared by the three commands.

The options are checked before the command does anything (one line, exit 2); each
given empty means none, as a scheduled unit's command line gives an unset variable. The
command fills in its counts (``JobHooks.update``); the exit status is the one the
process exits with, however the command ended, so the metrics and the message always
say what cron or systemd saw. Nothing here changes that status: a file or a push that
fails is one warning line.
"""

import functools
import time
from collections.abc import Callable, Iterable
from typing import Any

import click

from ..crawl.setup import check_http_url
from ..exit_status import ExitStatus
from ..interrupts import interrupted_status
from ..output import Command, OutputClosed, echo
from .job_summary import JobSummary, crawl_counts
from .side_request import SideRequestBudget


class JobHooks:
    def __init__(
        self,
        command: str,
        archive: str,
        metrics_file: str | None = None,
        pushgateway: str | None = None,
        notify_urls: Iterable[str] = (),
    ) -> None:
        if metrics_file:
            from .metrics import check_metrics_file

            check_metrics_file(metrics_file)
        if pushgateway:
            check_http_url(pushgateway, "--pushgateway", "http://pushgateway:9091")
        urls = [url for url in notify_urls if url]  # empty: none (an unset variable in a unit's command line)
        for url in urls:
            check_http_url(url, "--notify", "https://hooks.example.org/pith")
        self.metrics_file, self.pushgateway, self.notify_urls = metrics_file, pushgateway, urls
        self.summary = JobSummary(command, archive)

    def update(self, **counts: object) -> None:
        """The job's counts so far (JobSummary fields)."""
        for name, value in counts.items():
            setattr(self.summary, name, value)

    def interim_commit(self, **counts: object) -> None:
        """A crawl made an interim commit and goes on: the metrics file says how far it is."""
        self.update(**counts)
        if self.metrics_file:
            self._warn_on_failure("--metrics-file", self._write_metrics)

    def crawl_interim_commit(self, stats: dict) -> None:
        """``run_crawl``'s ``on_interim_commit``: a crawl's counts from its Scrapy stats."""
        self.interim_commit(**crawl_counts(stats))

    def crawl_ended(self, stats: dict, why: str) -> None:
        self.update(**crawl_counts(stats), why=why)

    def finish(self, status: ExitStatus) -> None:
        """Report the job. The push and the messages share one budget of time
        (``side_request``): however their receivers behave, the job ends soon after."""
        self.summary.status, self.summary.finished = status, time.time()
        if self.metrics_file:
            self._warn_on_failure("--metrics-file", self._write_metrics)
        budget = SideRequestBudget()
        if self.pushgateway:
            self._warn_on_failure("--pushgateway", lambda: self._push(budget))
        if self.notify_urls:
            from .notify import notify

            for line in notify(self.notify_urls, self.summary, budget):
                echo(line, err=True)

    def _write_metrics(self) -> None:
        from .metrics import write_metrics

        if self.metrics_file:
            write_metrics(self.metrics_file, self.summary)

    def _push(self, budget: SideRequestBudget) -> None:
        from .metrics import previous_values, push_metrics

        if self.pushgateway:
            push_metrics(self.pushgateway, self.summary, previous_values(self.metrics_file), budget)

    @staticmethod
    def _warn_on_failure(option: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # a report that fails never fails the job it reports
            echo(f"warning: {option}: {type(exc).__name__}: {exc}; the exit status is unchanged", err=True)


def _status_of(code: str | int | None) -> ExitStatus:
    try:
        return ExitStatus(0 if code is None else int(code))
    except (TypeError, ValueError):
        return ExitStatus.FAILED


def job_hook_options(command: str) -> Callable[[Command], Command]:
    """Adds --metrics-file, --pushgateway and --notify, and ``hooks`` (a JobHooks) to
    the command's arguments; reports the job however it ends."""

    def decorate(func: Command) -> Command:
        func = click.option(
            "--notify",
            "notify_urls",
            multiple=True,
            metavar="URL",
            help="POST a JSON summary of the job to this http(s) URL when it ends; repeatable; empty: none.",
        )(func)
        func = click.option(
            "--pushgateway", metavar="URL", help="Push the job's metrics to this Prometheus Pushgateway."
        )(func)
        func = click.option(
            "--metrics-file",
            metavar="FILE",
            help="Write the job's Prometheus metrics to this file (node_exporter's textfile collector), "
            "replaced whole at the end" + (" and at each interim commit." if command == "crawl" else "."),
        )(func)

        @functools.wraps(func)
        def wrapper(
            *args: Any,
            metrics_file: str | None = None,
            pushgateway: str | None = None,
            notify_urls: tuple[str, ...] = (),
            **kwargs: Any,
        ) -> None:
            hooks = JobHooks(command, kwargs.get("archive") or "", metrics_file, pushgateway, notify_urls)
            status = ExitStatus.FAILED  # an error nobody foresaw (the group makes it exit 4)
            try:
                func(*args, hooks=hooks, **kwargs)
                status = ExitStatus.OK
            except SystemExit as exc:
                status = _status_of(exc.code)
                raise
            except click.exceptions.Exit as exc:
                status = _status_of(exc.exit_code)
                raise
            except click.ClickException as exc:
                status = _status_of(exc.exit_code)
                hooks.summary.why = hooks.summary.why or exc.format_message()
                raise
            except KeyboardInterrupt as exc:  # and SIGTERM (pith_archiver.interrupts)
                status = interrupted_status(exc)
                raise
            except OutputClosed:
                status = ExitStatus.OUTPUT_CLOSED
                raise
            finally:
                hooks.finish(status)

        return wrapper

    return decorate
