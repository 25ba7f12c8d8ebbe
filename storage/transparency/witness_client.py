"""The client side of C2SP tlog-witness: ``POST <url>/add-checkpoint`` with ``old
<size>``, the consistency proof from that size, a blank line and the checkpoint. Every
call has a total deadline and a cap on the answer (``storage.runtime.deadline_http``), so a
slow or lying witness costs at most its deadline."""

import base64
import urllib.request
from urllib.parse import urlsplit

from storage.runtime.deadline_http import Answer, NoAnswer, exchange

MAX_ANSWER_BYTES = 1 << 16
DEADLINE = 10.0  # seconds, the whole call


class WitnessUnreachable(Exception):
    """The witness did not answer in time, or not in HTTP."""


def add_checkpoint_body(old: int, proof: list[bytes], note: str) -> bytes:
    lines = [f"old {old}", *(base64.b64encode(node).decode("ascii") for node in proof)]
    return ("\n".join(lines) + "\n\n" + note).encode("utf-8")


def post_add_checkpoint(url: str, body: bytes, deadline: float = DEADLINE) -> Answer:
    """One add-checkpoint call to the witness at ``url`` (its submission prefix)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WitnessUnreachable(f"not an http(s) URL: {url}")
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
        parts._replace(path=parts.path.rstrip("/") + "/add-checkpoint", query="", fragment="").geturl(),
        data=body,
        method="POST",
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    try:
        answer = exchange(request, deadline, MAX_ANSWER_BYTES)
    except NoAnswer as exc:
        raise WitnessUnreachable(f"{url}: {exc}") from None
    if len(answer.body) > MAX_ANSWER_BYTES:
        raise WitnessUnreachable(f"{url}: an answer larger than {MAX_ANSWER_BYTES} bytes")
    return answer
