"""The witness over HTTP: ``POST /add-checkpoint`` (``service``) and ``GET /healthz``,
on the mirror's hardened server (read deadlines, a body cap, a connection cap)."""

import asyncio
import logging

from storage.serving.http import Request, Response, text_response
from storage.serving.limits import KiB, ServerLimits
from storage.serving.server import HttpServer

from .service import Witness

logger = logging.getLogger(__name__)

LIMITS = ServerLimits(
    header_timeout=10.0, body_timeout=10.0, idle_timeout=10.0, send_timeout=10.0, max_body_bytes=64 * KiB
)


class WitnessServer(HttpServer):
    def __init__(self, witness: Witness, host: str = "127.0.0.1", port: int = 0, limits: ServerLimits = LIMITS):
        super().__init__(host, port, log_size=1000, limits=limits)
        self.witness = witness
        self._lock = asyncio.Lock()  # one add-checkpoint at a time: the view moves in order

    async def start(self) -> str:
        url = await super().start()
        logger.info("witness %s listening on %s", self.witness.vkey, url)
        return url

    async def _route(self, request: Request) -> Response:
        if request.path == "/add-checkpoint":
            if request.method != "POST":
                return text_response(405, headers=(("Allow", "POST"),))
            async with self._lock:
                verdict = await asyncio.to_thread(self.witness.add_checkpoint, request.body)
            return Response(verdict.status, verdict.body.encode("utf-8"), verdict.content_type)
        if request.path == "/healthz" and request.method in ("GET", "HEAD"):
            return text_response(200, "ok")
        return text_response(404)
