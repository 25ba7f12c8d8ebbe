"""Just enough HTTP/1.1 for a mirror: parse a request head, and turn a Response into
bytes on the wire with validators (strong ETag, Last-Modified), conditional requests
(304), gzip content coding and HEAD. Kept free of I/O so it can be tested and reused."""

import gzip
import hashlib
import time
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from functools import lru_cache
from http import HTTPStatus
from urllib.parse import parse_qs, unquote

SERVER = "pith-archiver-mirror"
MIN_GZIP_BYTES = 256
COMPRESSIBLE = ("application/json", "application/ld+json", "application/xml", "text/")


class BadRequest(ValueError):
    """A request head this server will not interpret (answered 400, connection closed)."""


@dataclass(slots=True)
class Request:
    method: str
    target: str  # as sent: path and query, percent-encoded
    path: str  # percent-decoded path
    query: dict[str, str]  # first value of each parameter
    version: str
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    body_length: int = 0  # the Content-Length declared
    body: bytes = b""  # read once the head is (a route that takes none ignores it)

    @property
    def raw_path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection

    def accepts(self, header: str, token: str) -> bool:
        """Whether a list header (Accept, Accept-Encoding) names ``token`` with q > 0."""
        for item in self.headers.get(header, "").split(","):
            name, _, params = item.partition(";")
            if name.strip().lower() == token:
                return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
        return False


TOKEN_CHARACTERS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # noqa: S105 - RFC 9110 token characters, not a password
CONTROLS = bytes(range(32)).replace(b"\t", b"") + b"\x7f"  # CR and LF among them
MAX_HEADERS = 100


def is_token(text: str) -> bool:
    return bool(text) and not text.strip(TOKEN_CHARACTERS)  # strip stops at the first other character


def parse_head(head: bytes, max_headers: int = MAX_HEADERS) -> Request:
    """Parse a request head (it ends with the blank line) strictly (RFC 9112): CRLF line
    ends only, no obsolete line folding, no control character in a value, header names
    that are tokens, a Content-Length of ASCII digits. Anything else is a BadRequest: a
    lenient parser is how a request smuggles another past a proxy that reads it otherwise."""
    if not head.endswith(b"\r\n\r\n"):
        raise BadRequest("the head does not end with CRLF CRLF")
    if len(head) - len(head.translate(None, CONTROLS)) != 2 * head.count(b"\r\n"):
        raise BadRequest("a bare CR or LF, or another control character, in the head")
    lines = head[:-4].decode("latin-1").split("\r\n")
    request_line = lines[0].split(" ")
    if (
        len(request_line) != 3
        or not is_token(request_line[0])
        or request_line[1][:1] != "/"
        or request_line[2] not in ("HTTP/1.1", "HTTP/1.0")
    ):
        raise BadRequest(f"malformed request line {lines[0][:80]!r}")
    if len(lines) - 1 > max_headers:
        raise BadRequest(f"more than {max_headers} header lines")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line[:1] in (" ", "\t"):
            raise BadRequest("obsolete line folding")
        name, sep, value = line.partition(":")
        if not sep or not is_token(name):
            raise BadRequest(f"malformed header name {name[:40]!r}")
        name, value = name.lower(), value.strip(" \t")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    length = headers.get("content-length", "0")
    if not (length.isascii() and length.isdigit() and len(length) <= 18):  # "1, 1" (repeated) is refused too
        raise BadRequest(f"Content-Length is not a number: {length[:40]!r}")
    method, target, version = request_line
    path, _, query = target.partition("?")
    parameters = {k: v[0] for k, v in parse_qs(query).items()} if query else {}
    return Request(method, target, unquote(path), parameters, version, headers, int(length))


@lru_cache(maxsize=16384)  # the Last-Modified of the records most asked for
def http_date(epoch: float) -> str:
    return formatdate(epoch, usegmt=True)


@dataclass(eq=False)
class Response:
    """A response before content negotiation of its coding. Cached Responses are shared
    between requests: nothing here is changed after construction but the two caches."""

    status: int
    body: bytes = b""
    content_type: str | None = None
    last_modified: float | None = None  # Unix time; with it and a 200, validators are sent
    headers: tuple = ()  # extra (name, value) pairs: Location, Retry-After, Allow
    vary: tuple = ()  # request headers the choice of body depended on
    record: str | None = None  # the record suffix it is about (for the request log)
    document: str | None = None  # "bundle", "state", "page", "jsonld", ... (for the request log)
    _etag: str | None = field(default=None, repr=False)
    _gzipped: bytes | None = field(default=None, repr=False)

    @property
    def etag(self) -> str:
        if self._etag is None:
            self._etag = '"' + hashlib.sha256(self.body).hexdigest()[:32] + '"'
        return self._etag

    def gzipped(self) -> bytes:
        if self._gzipped is None:
            self._gzipped = gzip.compress(self.body, compresslevel=6, mtime=0)
        return self._gzipped

    @property
    def compressible(self) -> bool:
        return self.content_type is not None and self.content_type.startswith(COMPRESSIBLE)


def text_response(status: int, message: str | None = None, headers: tuple = ()) -> Response:
    body = (message or f"{status} {HTTPStatus(status).phrase}") + "\n"
    return Response(status, body.encode("utf-8"), "text/plain; charset=utf-8", headers=headers)


def redirect(location: str, status: int = 301) -> Response:
    return text_response(status, f"see {location}", (("Location", location),))


def not_modified(request: Request, response: Response, etag: str) -> bool:
    """RFC 9110 13.1: If-None-Match (weak comparison) wins over If-Modified-Since."""
    match = request.headers.get("if-none-match")
    if match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in match.split(",")}
        return "*" in tags or etag in tags
    since = request.headers.get("if-modified-since")
    if since is None or response.last_modified is None:
        return False
    try:
        return int(response.last_modified) <= parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError):
        return False


_date_cache: list = [0, ""]


def _date_now() -> str:
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[:] = [now, http_date(now)]
    return _date_cache[1]


def encode_response(request: Request, response: Response, keep_alive: bool) -> tuple[bytes, bytes]:
    """The head and body to send for ``response`` to ``request``: picks the coding,
    answers conditional requests with 304, drops the body for HEAD."""
    status, body = response.status, response.body
    headers = [("Server", SERVER), ("Date", _date_now())]
    vary = list(response.vary)
    if response.compressible:
        vary.append("Accept-Encoding")
    if vary:
        headers.append(("Vary", ", ".join(vary)))
    if status == 200 and response.last_modified is not None:
        coded = response.compressible and len(body) >= MIN_GZIP_BYTES and request.accepts("accept-encoding", "gzip")
        etag = response.etag[:-1] + '-gzip"' if coded else response.etag
        headers += [("ETag", etag), ("Last-Modified", http_date(response.last_modified))]
        if request.method in ("GET", "HEAD") and not_modified(request, response, etag):
            status, body = 304, b""
        elif coded:
            body = response.gzipped()
            headers.append(("Content-Encoding", "gzip"))
    if status != 304 and response.content_type:
        headers.append(("Content-Type", response.content_type))
    headers.extend(response.headers)
    if status != 304:
        headers.append(("Content-Length", str(len(body))))
    headers.append(("Connection", "keep-alive" if keep_alive else "close"))
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1"), b"" if request.method == "HEAD" else body
