"""What goes wrong with a shared frontier, by name."""


class FrontierError(Exception):
    """The frontier is misconfigured or unreachable."""


class SigningKeyInUse(FrontierError):
    """Another live worker of the crawl signs with this worker's archiver key."""


class RequestNotSerializable(FrontierError, TypeError):
    """A request that opens no task a frontier entry can name."""


class RefusedEntry(FrontierError, ValueError):
    """An entry read from the frontier that is not a task this crawler would have queued.
    ``reason`` names the rule it breaks (counted as ``pith/frontier_refused/<reason>``)."""

    def __init__(self, reason: str, detail: object) -> None:
        detail = str(detail)
        super().__init__(f"{reason}: {detail[:200]}{'...' if len(detail) > 200 else ''}")
        self.reason = reason
