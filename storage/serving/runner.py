"""Running a MirrorServer (or any HttpServer): in the foreground until SIGINT/SIGTERM (the ``serve``
command), or on its own event loop in a background thread (tests and tools that need
a mirror while they do blocking work of their own)."""

import asyncio
import signal
import threading
from collections.abc import Callable

from .server import HttpServer, MirrorServer


def serve_until_signalled(server: HttpServer, on_ready: Callable[[str], None]) -> None:
    """Start ``server``, call ``on_ready(url)``, serve until SIGINT or SIGTERM. A second
    signal goes to the handlers there were before (the caller's): the close may wait
    for a request's thread, which a second signal must not."""

    async def main() -> None:
        url = await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
        for signum in before:
            loop.add_signal_handler(signum, stop.set)
        on_ready(url)
        await stop.wait()
        for signum, handler in before.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        await server.close()

    asyncio.run(main())


class BackgroundMirror:
    """A MirrorServer on a daemon thread: ``start()`` returns once it listens (its
    ``server.url`` is set), ``stop()`` closes it and joins the thread. A context manager."""

    def __init__(self, server: MirrorServer):
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pith-mirror", daemon=True)

    def start(self) -> MirrorServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=60)
        return self.server

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def __enter__(self) -> MirrorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
