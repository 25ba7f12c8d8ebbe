"""The client side of C2SP tlog-witness: ``POST <url>/add-checkpoint`` with ``old
<size>``, the consistency proof from that size, a blank line and the checkpoint. Every
call has a total deadline and a cap on the answer, so a slow or lying witness costs
at most its deadline."""

import base64
import http.client
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_ANSWER_BYTES = 1 << 16
DEADLINE = 10.0  # seconds, the whole call


class WitnessUnreachable(Exception):
    """The witness did not answer in time, or not in HTTP."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def add_checkpoint_body(old: int, proof: list[bytes], note: str) -> bytes:
    lines = [f"old {old}", *(base64.b64encode(node).decode("ascii") for node in proof)]
    return ("\n".join(lines) + "\n\n" + note).encode("utf-8")


def post_add_checkpoint(url: str, body: bytes, deadline: float = DEADLINE) -> Answer:
    """One add-checkpoint call to the witness at ``url`` (its submission prefix)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WitnessUnreachable(f"not an http(s) URL: {url}")
    end = time.monotonic() + deadline
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=deadline)
    try:
        connection.request(
            "POST", parts.path.rstrip("/") + "/add-checkpoint", body, {"Content-Type": "text/plain; charset=utf-8"}
        )
        response = connection.getresponse()
        answer = b""
        while chunk := response.read1(4096):
            answer += chunk
            if len(answer) > MAX_ANSWER_BYTES:
                raise WitnessUnreachable(f"{url}: an answer larger than {MAX_ANSWER_BYTES} bytes")
            if time.monotonic() > end:
                raise WitnessUnreachable(f"{url}: no whole answer within {deadline:g} s")
            if connection.sock is not None:
                connection.sock.settimeout(max(0.01, end - time.monotonic()))
        return Answer(response.status, answer)
    except (OSError, http.client.HTTPException) as exc:
        raise WitnessUnreachable(f"{url}: {exc}") from None
    finally:
        connection.close()
