"""The mirror's HTTP/1.1 server: asyncio streams with keep-alive on one event loop
(one core), answering from a ResolverSite, with optional fault injection and a request
log that in-process tests read. The stdlib ``http.server`` is several times slower
and cannot inject connection-level faults, hence this small server; aiohttp and
twisted.web were measured against it too (bench/RESULTS.md, "Mirror server choice").

Fit for a public mirror: every read and send has a deadline and open connections are
capped (ServerLimits), requests are parsed strictly (``parse_head``), and client
garbage gets a 4xx answer and a closed connection, never a traceback in the log."""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass

from .faults import FaultInjector, FaultPlan
from .http import BadRequest, Request, encode, parse_head, text_response
from .limits import MAX_BUSY_LINGERING, ServerLimits, accept_backlog
from .resolver import ResolverSite, SiteOptions
from .source import RecordSource

logger = logging.getLogger(__name__)

LINGER_SECONDS = 2.0
BUSY_LINGER_SECONDS = 0.5
_BAD_REQUEST = Request("GET", "/", "/", {}, "HTTP/1.1", {"connection": "close"})


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One answered (or deliberately dropped) request, as a test wants to see it."""

    method: str
    target: str  # path and query as sent
    path: str  # decoded path
    status: int  # 0 when the connection was dropped without an answer
    headers: dict  # request headers, lower-cased names
    fault: str | None = None  # "fail_first", "rate_limit", "error", "drop", "truncate", "tamper", ...
    document: str | None = None
    record: str | None = None


async def _read_to_end(reader: asyncio.StreamReader) -> None:
    while await reader.read(64 * 1024):
        pass


class MirrorServer:
    """Serves a RecordSource in the resolver layout.

    ``await start()`` binds (port 0 picks a free port) and sets ``url``; links in
    documents use ``public_url`` when given, else ``url``. ``set_faults`` swaps the
    fault plan (and restarts its counters) at any time; ``requests`` is the log;
    ``peak_in_flight`` is the most requests it was answering at once (a client's
    politeness, seen from the server); ``refused_connections`` counts the connections
    answered 503 beyond ``limits.max_connections``."""

    def __init__(
        self,
        source: RecordSource,
        host: str = "127.0.0.1",
        port: int = 0,
        public_url: str | None = None,
        options: SiteOptions = SiteOptions(),
        faults: FaultPlan = FaultPlan(),
        log_size: int = 100_000,
        limits: ServerLimits | None = None,
    ):
        self.source, self.host, self.port = source, host, port
        self.public_url, self.options = public_url, options
        self.limits = limits or ServerLimits()
        self._faults = FaultInjector(faults)
        self._log: deque[LoggedRequest] = deque(maxlen=log_size)
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self.url: str | None = None
        self.in_flight = self.peak_in_flight = self.refused_connections = 0
        self._busy_lingering = 0
        self.resolver: ResolverSite | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=self.limits.max_head_bytes, backlog=accept_backlog()
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        self.resolver = ResolverSite(self.source, self.public_url or self.url, self.options)
        logger.info("mirror of %d records listening on %s", len(self.source.catalog), self.url)
        return self.url

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task, writer in list(self._connections.items()):
                writer.transport.abort()
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

    @property
    def faults(self) -> FaultPlan:
        return self._faults.plan

    def set_faults(self, plan: FaultPlan) -> None:
        self._faults = FaultInjector(plan)

    @property
    def requests(self) -> list[LoggedRequest]:
        return list(self._log)

    def clear_log(self) -> None:
        self._log.clear()
        self.peak_in_flight = self.in_flight

    # --- connections ---------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cap = self.limits.max_connections  # set by ServerLimits
        if cap is not None and len(self._connections) >= cap:
            return await self._busy(reader, writer)
        task = asyncio.current_task()
        if task is None:  # asyncio runs every connection's callback as a task
            raise RuntimeError("a connection outside a task")
        self._connections[task] = writer
        try:
            first = True
            while await self._exchange(reader, writer, first):
                first = False
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            del self._connections[task]
            writer.close()

    async def _busy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Beyond the cap: a 503, then a close once the client has it. The close waits
        (at most BUSY_LINGER_SECONDS, for at most MAX_BUSY_LINGERING connections at once)
        for what the client already sent: closing on unread input resets the connection,
        which would destroy the 503 on its way."""
        if not self.refused_connections:
            logger.warning(
                "%d connections open, the most allowed (--max-connections): answering 503", len(self._connections)
            )
        self.refused_connections += 1
        head, body = encode(
            _BAD_REQUEST,
            text_response(503, "too many connections, try again", (("Retry-After", "1"),)),
            keep_alive=False,
        )
        writer.write(head + body)
        writer.write_eof()
        if self._busy_lingering < MAX_BUSY_LINGERING:
            self._busy_lingering += 1
            try:
                await asyncio.wait_for(_read_to_end(reader), BUSY_LINGER_SECONDS)
            except (TimeoutError, ConnectionError):
                pass
            finally:
                self._busy_lingering -= 1
        writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bool) -> bool:
        """Read one request and answer it; False when the connection should end. The
        first request of a connection has ``header_timeout`` from the connection's
        opening; a later one may wait ``idle_timeout`` for its first byte, then has
        ``header_timeout`` for the rest of its head."""
        limits, loop = self.limits, asyncio.get_running_loop()
        started = False
        try:
            async with asyncio.timeout(limits.header_timeout if first else limits.idle_timeout) as deadline:
                start = await reader.readexactly(1)
                started = True
                deadline.reschedule(loop.time() + limits.header_timeout)
                head = start + await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed between requests (or within one: nothing to answer)
        except asyncio.LimitOverrunError:
            return await self._refuse(reader, writer, 431)
        except TimeoutError:
            return started and self._timed_out(writer)  # an idle keep-alive connection just closes
        try:
            request = parse_head(head, limits.max_headers)
        except BadRequest as exc:
            logger.debug("400 for a malformed request: %s", exc)
            return await self._refuse(reader, writer, 400)
        if "transfer-encoding" in request.headers:
            return await self._refuse(reader, writer, 501)
        if request.body_length > limits.max_body_bytes:
            return await self._refuse(reader, writer, 413)
        if request.body_length:
            try:
                async with asyncio.timeout(limits.body_timeout):
                    await reader.readexactly(request.body_length)  # no route takes a body: read past it
            except TimeoutError:
                return self._timed_out(writer)
        return await self._answer(request, writer)

    def _timed_out(self, writer: asyncio.StreamWriter) -> bool:
        """A 408 and a close, without waiting for a client that is already too slow."""
        head, body = encode(_BAD_REQUEST, text_response(408), keep_alive=False)
        writer.write(head + body)
        writer.write_eof()  # the answer goes out before a reset for unread input can
        return False

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int) -> bool:
        """Answer ``status`` and close, first reading what the client still sends
        (a lingering close): closing on unread input would reset the connection and
        could destroy the answer before the client reads it."""
        head, body = encode(_BAD_REQUEST, text_response(status), keep_alive=False)
        writer.write(head + body)
        writer.write_eof()
        try:
            await asyncio.wait_for(_read_to_end(reader), LINGER_SECONDS)
        except TimeoutError:
            pass
        return False

    async def _answer(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._respond(request, writer)
        finally:
            self.in_flight -= 1

    async def _respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        injector = self._faults
        decision = injector.decide(request)
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.drop:
            self._record(request, 0, "drop")
            writer.transport.abort()
            return False
        if decision.response:
            response = decision.response
        elif self.resolver is None:
            raise RuntimeError("the mirror answers requests once started")
        elif self.source.remote:  # a slow store must not stall every other client
            response = await asyncio.to_thread(self.resolver.respond, request)
        else:
            response = self.resolver.respond(request)
        response = injector.transform(request, response)
        keep_alive = request.keep_alive
        head, body = encode(request, response, keep_alive)
        truncate = decision.truncate and bool(body)
        # logged before writing, so a client that has its answer finds it in the log
        self._record(
            request, int(head[9:12]), "truncate" if truncate else response.fault, response.document, response.record
        )
        if response.stream is not None:
            writer.write(head)
            sent = request.method == "HEAD" or await self._within_send_timeout(response.stream(writer), writer)
        else:
            writer.write(head + body[: len(body) // 2] if truncate else head + body)
            # most answers fit the socket's buffer at once: only one the client has not taken yet waits
            sent = not writer.transport.get_write_buffer_size() or await self._within_send_timeout(
                writer.drain(), writer
            )
        return sent and keep_alive and response.stream is None and not truncate

    async def _within_send_timeout(self, sending: Awaitable[object], writer: asyncio.StreamWriter) -> bool:
        """Await ``sending``; a client that takes longer than send_timeout loses its connection."""
        try:
            async with asyncio.timeout(self.limits.send_timeout):
                await sending
            return True
        except TimeoutError:
            writer.transport.abort()
            return False

    def _record(
        self, request: Request, status: int, fault: str | None, document: str | None = None, record: str | None = None
    ) -> None:
        self._log.append(
            LoggedRequest(
                request.method, request.target, request.path, status, request.headers, fault, document, record
            )
        )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s -> %s%s", request.method, request.target, status, f" [{fault}]" if fault else "")
