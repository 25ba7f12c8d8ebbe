"""The mirror server with fault injection: the public MirrorServer, answering through a
FaultInjector, so crawler tests can prove they survive what real servers do. Its
request log names the fault that shaped each answer."""

import asyncio
from dataclasses import dataclass, fields, replace

from storage.serving.http import Request, Response, encode_response
from storage.serving.server import LoggedRequest, MirrorServer

from .faults import FaultInjector, FaultPlan, FaultyResponse, endless_head, faulted


@dataclass(frozen=True, slots=True)
class FaultyLoggedRequest(LoggedRequest):
    """A logged request, with the fault injected into its answer (status 0: dropped unanswered)."""

    fault: str | None = None


class FaultyMirrorServer(MirrorServer):
    """A MirrorServer injecting ``faults`` (a FaultPlan); ``set_faults`` swaps the plan
    (and restarts its counters) at any time. Other arguments are MirrorServer's."""

    def __init__(self, *args, faults: FaultPlan = FaultPlan(), **kwargs):
        super().__init__(*args, **kwargs)
        self._faults = FaultInjector(faults)

    @property
    def faults(self) -> FaultPlan:
        return self._faults.plan

    def set_faults(self, plan: FaultPlan) -> None:
        self._faults = FaultInjector(plan)

    async def _respond(self, request: Request, writer) -> bool:
        injector = self._faults
        decision = injector.decide(request)
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.drop:
            self._record(request, 0, FaultyResponse(0, fault="drop"))
            writer.transport.abort()
            return False
        response = decision.response or await self._route(request)
        swapped = injector.swapped(response)
        if swapped is not None:
            other = await self._route(replace(request, target=swapped, path=swapped))
            response = faulted(other, "swap", record=response.record)
        response = injector.transform(request, response)
        if injector.trickles(response):
            return await self._send_trickle(request, response, writer)
        if getattr(response, "stream", None) is not None:
            return await self._send_endless(request, response, writer)
        if decision.truncate:
            head, body = encode_response(request, response, request.keep_alive)
            if body:  # half the body, then a close: the Content-Length sent is never reached
                self._record(request, int(head[9:12]), faulted(response, "truncate"))
                writer.write(head + body[: len(body) // 2])
                await self._within_send_timeout(writer.drain(), writer)
                return False
        return await self._send(request, response, writer)

    async def _send_endless(self, request: Request, response: FaultyResponse, writer) -> bool:
        self._record(request, 200, response)
        writer.write(endless_head(response.content_type))
        if request.method != "HEAD":
            await self._within_send_timeout(response.stream(writer), writer)
        return False

    async def _send_trickle(self, request: Request, response: Response, writer) -> bool:
        """The answer a byte at a time, plan.trickle seconds apart, until it is sent or
        the client gives up."""
        self._record(request, response.status, faulted(response, "trickle"))
        head, body = encode_response(request, response, False)
        answer = head + body
        for at in range(len(answer)):
            if writer.transport.is_closing():
                break
            writer.write(answer[at : at + 1])
            await asyncio.sleep(self.faults.trickle)
        return False

    def _entry(self, request: Request, status: int, response: Response) -> FaultyLoggedRequest:
        entry = super()._entry(request, status, response)
        return FaultyLoggedRequest(*(getattr(entry, f.name) for f in fields(entry)), getattr(response, "fault", None))
