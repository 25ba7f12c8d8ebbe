"""Parse and verify fetched bundles off the reactor, in worker processes.

Verifying a bundle is ~0.5 ms of Python that holds the GIL (only the Ed25519 checks
release it), so threads would slow Scrapy's thread rather than free it: the work goes
to processes (bench/RESULTS.md, "Verification off the reactor"). Each worker has one
socket to the crawl, read by the reactor itself: a bundle goes down it as its bytes and
the verdict comes back as JSON, with the verified bundle's rows for the archive and
without its parsed tree, which the crawl rebuilds from the bytes it holds only when it
reads it (``crawler.verifying.verify_worker``), so the crawl's thread spends a few hundredths
of a millisecond per bundle instead of the whole check. At most ``IN_FLIGHT_PER_WORKER`` bundles per worker
are under way; past that the spider's callback waits, its responses stay in Scrapy's
scraper and the engine stops downloading until the workers catch up. A worker that
dies (killed, out of memory), or answers anything but a verdict, takes nothing with it: another is started and its
bundles are verified again.
"""

import asyncio
import collections
import logging
import socket
import subprocess
from typing import TYPE_CHECKING

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.asyncio import is_asyncio_available

from pith.keyring import Keyring
from pith.parse import Limits
from storage.capture.warc_process import WarcProcess
from storage.runtime.child_process import FRAME, framed, start_child
from storage.runtime.cores import available_cores

from .. import signals as pith_signals
from ..defaults import PITH_VERIFY_TIMEOUT
from ..stat_keys import Stat
from .verify_worker import BundleChecker, Checked, decode, restore

if TYPE_CHECKING:
    from storage.writing.writer import ArchiveWriter

logger = logging.getLogger(__name__)

SERVICE = "crawler.verifying.verify_worker:serve_verifier"
IN_FLIGHT_PER_WORKER = 32
ATTEMPTS = 3  # workers a bundle may outlive before it is verified in the crawl's own thread
STOP_WAIT = 5.0  # seconds a closing crawl waits for a worker to finish and exit


def default_workers() -> int:
    """One worker where this process may use two cores or more, else none. One worker
    verifies ~2,000 bundles a second, several times what one crawl thread fetches, so a
    second never helps (measured: bench/RESULTS.md, "Verification off the reactor")."""
    return 1 if available_cores() >= 2 else 0


def verifier_processes(settings: BaseSettings) -> int:
    """How many verifier processes a crawl runs: PITH_VERIFY_WORKERS, or the default."""
    workers = settings.get("PITH_VERIFY_WORKERS")
    return max(default_workers() if workers is None else settings.getint("PITH_VERIFY_WORKERS"), 0)


class WorkerLost(Exception):
    """The worker holding a bundle died before it answered."""


class Worker:
    """One verifier and its socket: bundles in, verdicts out, in order. Its own process,
    or (``channel``) the verifier the crawl's WARC writer process hosts."""

    def __init__(
        self,
        checker: BundleChecker,
        channel: socket.socket | None = None,
        folder: str | None = None,
        timeout: float = PITH_VERIFY_TIMEOUT,
    ):
        """``folder``: the archive's, where it stores what it verifies (``verify_worker``);
        ``timeout``: how long it may answer nothing while it holds bundles before it is
        taken for dead."""
        self.timeout = timeout
        if channel is None:
            process, (ours,) = start_child(SERVICE)
            self.process: subprocess.Popen | None = process
        else:
            self.process, ours = None, channel
        # sent once it runs: a large keyring may not fit the socket's buffer
        configuration = checker.configuration(folder)
        try:
            ours.sendall(framed(configuration))
        except OSError:  # it died at once: its reader sees the socket closed, and another is started
            pass
        self.pending: collections.deque[asyncio.Future] = collections.deque()
        self.alive = True
        self._progress = 0.0  # the loop's time of its last answer, or of work reaching it idle
        self._deadline: asyncio.TimerHandle | None = None  # ``_watch``
        self._socket = ours
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None
        self._opening = asyncio.ensure_future(self._open())

    async def _open(self) -> None:
        reader, self._writer = await asyncio.open_unix_connection(sock=self._socket)
        self._reading = asyncio.ensure_future(self._read(reader))

    async def check(self, raw: bytes) -> Checked | None:
        """What the worker found, or None when it could not send it back."""
        if self._writer is None:
            await self._opening
        if not self.alive:
            raise WorkerLost
        if self._writer is None:  # it died before its socket opened
            raise WorkerLost
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        if not self.pending:
            self._progress = loop.time()
        self.pending.append(answer)
        self._writer.writelines((FRAME.pack(len(raw)), raw))
        self._watch()
        return await answer

    def _watch(self) -> None:
        """Arm the worker's one timer (a timer a bundle, ``asyncio.wait_for``, cost ~6 µs
        of the crawl's thread each): due ``timeout`` seconds after its last answer, or
        after work reached it idle. A worker answering a long queue slowly keeps its place;
        one that answers nothing that long while holding bundles is taken for dead."""
        if self._deadline is None and self.pending and self.alive:
            self._deadline = asyncio.get_running_loop().call_at(self._progress + self.timeout, self._expire)

    def _disarm(self) -> None:
        """It takes no more bundles, and its timer is off."""
        self.alive = False
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.pending or not self.alive:
            return
        if asyncio.get_running_loop().time() < self._progress + self.timeout:  # it answered since
            self._watch()
            return
        # frozen, or stuck in a write: what it holds goes to another
        logger.warning("a verifier process answered nothing for %.0f s: it is replaced", self.timeout)
        if self.process is not None:
            self.process.kill()
        if self._reading is not None:
            self._reading.cancel()
        self._lost()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
                answer = await reader.readexactly(size)
                checked = decode(answer) if answer else None  # before its waiter leaves the queue
                self._progress = asyncio.get_running_loop().time()
                waiter = self.pending.popleft()
                if not waiter.done():  # its caller was cancelled meanwhile (the crawl closing)
                    waiter.set_result(checked)
        except (asyncio.IncompleteReadError, ConnectionError):  # it died, or we closed it
            pass
        except (ValueError, TypeError, KeyError, IndexError) as exc:  # unasked, or not what a worker writes
            logger.warning("a verifier process sent what is not a verdict (%s): it is replaced", exc)
        self._lost()  # what it held is verified again, by another (Verifier._replace)

    def _lost(self) -> None:
        self._disarm()
        while self.pending:
            answer = self.pending.popleft()
            if not answer.done():
                answer.set_exception(WorkerLost())

    def close(self) -> None:
        """Closing its socket tells the worker to exit; one that does not is killed."""
        self._disarm()
        self._opening.cancel()
        if self._reading is not None:
            self._reading.cancel()
        try:
            self._socket.shutdown(socket.SHUT_WR)  # at once: the reactor may not run again before the join
        except OSError:  # it died first
            pass
        if self.process is not None:  # a hosted verifier ends with its host, the WARC writer
            try:
                self.process.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._writer is not None:
            self._writer.close()
        else:
            self._socket.close()


class Verifier:
    """``await verifier.verify(raw)``: the verdict on a bundle's bytes, whether they
    parsed and their SHA-256 (``Checked``). Settings: PITH_KEYRINGS, PITH_DEFAULT_KEYS,
    PITH_VERIFY_WORKERS (0: in the crawl's own thread), PITH_VERIFY_TIMEOUT."""

    def __init__(self, checker: BundleChecker, workers: int, timeout: float = PITH_VERIFY_TIMEOUT):
        self.checker = checker
        self.workers = workers
        self.timeout = timeout
        self.stats: StatsCollector | None = None  # the crawl's, once it opens
        self.running: list[Worker] = []
        self.slots = asyncio.Semaphore(workers * IN_FLIGHT_PER_WORKER) if workers else None
        self._hosted: socket.socket | None = None  # the verifier the WARC writer's process hosts, until used
        self.folder: str | None = None  # the archive's folder, once it opens, when its workers may store there

    @classmethod
    def for_crawl(cls, crawler: Crawler, keyring: Keyring) -> "Verifier":
        """The spider's verifier (never NotConfigured: a crawl without one would archive
        nothing, or worse), checking with the crawl's keyring."""
        timeout = crawler.settings.getfloat("PITH_VERIFY_TIMEOUT", PITH_VERIFY_TIMEOUT)
        verifier = cls(BundleChecker(keyring, Limits()), verifier_processes(crawler.settings), timeout)
        crawler.signals.connect(verifier.adopt, signal=pith_signals.archive_opened)
        crawler.signals.connect(verifier.open, signal=signals.spider_opened)
        crawler.signals.connect(verifier.close, signal=signals.spider_closed)
        return verifier

    async def verify(self, raw: bytes, tree: bool = True) -> Checked:
        """``tree``: whether the caller reads a verified bundle's parsed tree (the
        verdict's ``bundle``); without it a worker's verdict comes without one."""
        if self.workers and not self.running and not is_asyncio_available():
            logger.warning("PITH_VERIFY_WORKERS needs Scrapy's asyncio reactor: verifying in the crawl's thread")
            self.workers = 0
        if not self.workers or self.slots is None:
            return self.checker(raw)
        async with self.slots:
            for _ in range(ATTEMPTS):
                worker = self._least_busy()
                try:
                    answer = await worker.check(raw)
                except WorkerLost:
                    self._replace(worker)
                    continue
                if answer is None:
                    break
                return restore(answer, raw, self.checker.limits, tree)
            else:
                logger.warning(
                    "%d verifier processes died holding one bundle: verifying it in the crawl's thread", ATTEMPTS
                )
        return self.checker(raw)

    def adopt(self, warc: WarcProcess | None = None, writer: "ArchiveWriter | None" = None) -> None:
        """The crawl's archive opened: its WARC writer's process hosts the first worker,
        and the workers store what they verify in the archive's folder, if it has one."""
        if warc is not None:
            self._hosted = warc.channel(SERVICE)
        if writer is not None:
            self.folder = writer.store.folder

    def _least_busy(self) -> Worker:
        if len(self.running) < self.workers:
            hosted, self._hosted = self._hosted, None
            self.running.append(Worker(self.checker, hosted, self.folder, self.timeout))
            return self.running[-1]
        return min(self.running, key=lambda worker: len(worker.pending))

    def _replace(self, lost: Worker) -> None:
        """A worker died: each bundle it held comes back as WorkerLost and is sent again,
        to a new worker started in its place."""
        if lost in self.running:
            logger.warning("a verifier process died; starting another and verifying its bundles again")
            self.running.remove(lost)
            lost.close()
            if self.stats is not None:
                self.stats.inc_value(Stat.VERIFY_POOL_RESTARTS)

    def open(self, spider: Spider) -> None:
        self.stats = spider.crawler.stats
        if self.stats is not None:
            self.stats.set_value(Stat.VERIFY_WORKERS, self.workers)

    def close(self) -> None:
        for worker in self.running:
            worker.close()
        self.running = []
        if self._hosted is not None:  # never used
            self._hosted.close()
            self._hosted = None
