"""How long and how much one client may take of a mirror: read deadlines, the idle
keep-alive timeout, a send deadline and a cap on open connections, so that slow or
hostile clients cannot hold every socket (and file descriptor) a public mirror has."""

import resource
from dataclasses import dataclass

KiB = 1024
CONNECTION_CAP = 512  # the most connections served by default, whatever the open-file limit allows
MAX_ACCEPT_BACKLOG = 100  # connections accepted in one go (asyncio's default), and the kernel's queue of them
MAX_BUSY_LINGERING = 16  # connections beyond the cap that wait a moment for their 503 to arrive
BASE_DESCRIPTORS = 32  # stdio, the event loop, the listening socket, bundle files, logs, store clients


def open_file_limit() -> int:
    """The process's open-file limit (RLIMIT_NOFILE, soft); 1 << 20 for unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def accept_backlog(descriptors: int | None = None) -> int:
    """How many connections the server accepts in one go: MAX_ACCEPT_BACKLOG, or an
    eighth of a small open-file limit."""
    return max(8, min(MAX_ACCEPT_BACKLOG, (descriptors or open_file_limit()) // 8))


def descriptor_room(descriptors: int | None = None) -> int:
    """How many connections the open-file limit leaves room for. Set aside: two accept
    batches (a batch is accepted before any connection in it is turned away), the
    lingering refusals and the process's own files; and at least a quarter stays free."""
    descriptors = descriptors or open_file_limit()
    reserve = 2 * accept_backlog(descriptors) + MAX_BUSY_LINGERING + BASE_DESCRIPTORS
    return max(1, descriptors - max(reserve, descriptors // 4))


@dataclass(frozen=True)
class ServerLimits:
    """Every deadline is in seconds. ``max_connections`` None: CONNECTION_CAP, or less
    when the open-file limit leaves less room (see ``descriptor_room``)."""

    header_timeout: float = 10.0  # from a request's first byte (or the connection's opening) to its blank line
    body_timeout: float = 30.0  # to receive a declared request body
    idle_timeout: float = 30.0  # a keep-alive connection waiting for its next request
    send_timeout: float = 30.0  # for the client to take an answer
    max_connections: int | None = None
    max_head_bytes: int = 64 * KiB
    max_headers: int = 100
    max_body_bytes: int = 1024 * KiB

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "idle_timeout", "send_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be more than 0 seconds")
        if min(self.max_head_bytes, self.max_headers, self.max_body_bytes) < 1:
            raise ValueError("head, header and body limits must be at least 1")
        room = descriptor_room()
        if self.max_connections is None:
            object.__setattr__(self, "max_connections", min(CONNECTION_CAP, room))
        elif not 1 <= self.max_connections <= room:
            raise ValueError(
                f"max_connections must be between 1 and {room}: the open-file limit ({open_file_limit()}) "
                "leaves no more; raise it (ulimit -n) to serve more connections"
            )
