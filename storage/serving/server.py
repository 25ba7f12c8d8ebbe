"""The mirror's HTTP/1.1 server: asyncio streams with keep-alive on one event loop
(one core), answering from a ResolverSite, with a request log that in-process tests
read. The stdlib ``http.server`` is several times slower, hence this small server;
aiohttp and twisted.web were measured against it too (bench/RESULTS.md, "Mirror server
choice"). The test kit's fault-injecting server (``pith_testkit.server``) extends it;
nothing here injects faults.

Fit for a public mirror: every read and send has a deadline and open connections are
capped (ServerLimits), requests are parsed strictly (``parse_head``), and client
garbage gets a 4xx answer and a closed connection, never a traceback in the log."""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass

from .http import BadRequest, Request, Response, encode_response, parse_head, text_response
from .limits import MAX_BUSY_LINGERING, ServerLimits, accept_backlog
from .resolver import ResolverSite, SiteOptions
from .source import RecordSource

logger = logging.getLogger(__name__)

LINGER_SECONDS = 2.0
BUSY_LINGER_SECONDS = 0.5
RENEW_SECONDS = 5.0  # how often a running mirror asks its source whether it changed
_BAD_REQUEST = Request("GET", "/", "/", {}, "HTTP/1.1", {"connection": "close"})


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One answered request, as a test wants to see it."""

    method: str
    target: str  # path and query as sent
    path: str  # decoded path
    status: int
    headers: dict  # request headers, lower-cased names
    document: str | None = None
    record: str | None = None


async def _read_to_end(reader: asyncio.StreamReader) -> None:
    while await reader.read(64 * 1024):
        pass


class HttpServer:
    """The hardened HTTP/1.1 server itself, whatever it answers: subclasses route
    (``_route``). ``await start()`` binds (port 0 picks a free port) and sets ``url``;
    ``requests`` is the log; ``peak_in_flight`` is the most requests it was answering
    at once; ``refused_connections`` counts the connections answered 503 beyond
    ``limits.max_connections``. A request body (at most ``limits.max_body_bytes``,
    within ``limits.body_timeout``) is read into ``Request.body``."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, log_size: int = 100_000, limits: ServerLimits | None = None
    ):
        self.host, self.port = host, port
        self.limits = limits or ServerLimits()
        self._log: deque[LoggedRequest] = deque(maxlen=log_size)
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self.url: str | None = None
        self.in_flight = self.peak_in_flight = self.refused_connections = 0
        self._busy_lingering = 0

    async def start(self) -> str:
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=self.limits.max_head_bytes, backlog=accept_backlog()
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
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
    def requests(self) -> list[LoggedRequest]:
        return list(self._log)

    def clear_log(self) -> None:
        self._log.clear()
        self.peak_in_flight = self.in_flight

    async def _route(self, request: Request) -> Response:
        raise NotImplementedError

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
        except (OSError, asyncio.IncompleteReadError):  # a client gone mid-answer (reset, or ENOTCONN on a close)
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
        head, body = encode_response(
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
                    request.body = await reader.readexactly(request.body_length)
            except TimeoutError:
                return self._timed_out(writer)
        return await self._answer(request, writer)

    def _timed_out(self, writer: asyncio.StreamWriter) -> bool:
        """A 408 and a close, without waiting for a client that is already too slow."""
        head, body = encode_response(_BAD_REQUEST, text_response(408), keep_alive=False)
        writer.write(head + body)
        writer.write_eof()  # the answer goes out before a reset for unread input can
        return False

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int) -> bool:
        """Answer ``status`` and close, first reading what the client still sends
        (a lingering close): closing on unread input would reset the connection and
        could destroy the answer before the client reads it."""
        head, body = encode_response(_BAD_REQUEST, text_response(status), keep_alive=False)
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
        return await self._send(request, await self._route(request), writer)

    async def _send(self, request: Request, response: Response, writer: asyncio.StreamWriter) -> bool:
        """Write ``response``; whether the connection may carry another request."""
        keep_alive = request.keep_alive
        head, body = encode_response(request, response, keep_alive)
        self._record(request, int(head[9:12]), response)  # logged first: a client that has its answer finds it
        writer.write(head + body)
        # most answers fit the socket's buffer at once: only one the client has not taken yet waits
        sent = not writer.transport.get_write_buffer_size() or await self._within_send_timeout(writer.drain(), writer)
        return sent and keep_alive

    async def _within_send_timeout(self, sending: Awaitable[object], writer: asyncio.StreamWriter) -> bool:
        """Await ``sending``; a client that takes longer than send_timeout loses its connection."""
        try:
            async with asyncio.timeout(self.limits.send_timeout):
                await sending
            return True
        except TimeoutError:
            writer.transport.abort()
            return False

    def _record(self, request: Request, status: int, response: Response) -> None:
        self._log.append(self._entry(request, status, response))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s -> %s", request.method, request.target, status)

    def _entry(self, request: Request, status: int, response: Response) -> LoggedRequest:
        return LoggedRequest(
            request.method, request.target, request.path, status, request.headers, response.document, response.record
        )


class MirrorServer(HttpServer):
    """Serves a RecordSource in the resolver layout; links in documents use
    ``public_url`` when given, else ``url``. Left running, it asks its source at most
    every ``renew_every`` seconds, as requests come, whether what it serves changed (an
    archive's new runs): a source read anew is swapped in once read, the requests in
    between answered from the one before."""

    def __init__(
        self,
        source: RecordSource,
        host: str = "127.0.0.1",
        port: int = 0,
        public_url: str | None = None,
        options: SiteOptions = SiteOptions(),
        log_size: int = 100_000,
        limits: ServerLimits | None = None,
        renew_every: float = RENEW_SECONDS,
    ):
        super().__init__(host, port, log_size, limits)
        self.source, self.public_url, self.options = source, public_url, options
        self.resolver: ResolverSite | None = None
        self.renew_every = renew_every
        self._checked = time.monotonic()
        self._renewing: asyncio.Task | None = None

    async def start(self) -> str:
        url = await super().start()
        self.switch_to(self.source)
        logger.info("mirror of %d records listening on %s", len(self.source.catalog), url)
        return url

    def switch_to(self, source: RecordSource) -> None:
        """Serve ``source`` from now on (the documents cached of the one before dropped)."""
        if self.url is None:
            raise RuntimeError("a mirror switches sources once started")
        self.source, self.resolver = source, ResolverSite(source, self.public_url or self.url, self.options)

    async def close(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
        await super().close()

    async def _route(self, request: Request) -> Response:
        resolver = self.resolver
        if resolver is None:
            raise RuntimeError("the mirror answers requests once started")
        self._renew_when_due()
        if self.source.remote or resolver.is_slow(request):  # a slow read must not stall every other client
            return await asyncio.to_thread(resolver.respond, request)
        return resolver.respond(request)

    def _renew_when_due(self) -> None:
        now = time.monotonic()
        if self._renewing is None and now - self._checked >= self.renew_every:
            self._checked = now
            self._renewing = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        try:
            renewed = await asyncio.to_thread(self.source.renewed)
            if renewed is not None:
                self.switch_to(renewed)
                logger.info("now serving %d records: the source changed", len(renewed.catalog))
        finally:
            self._renewing = None
