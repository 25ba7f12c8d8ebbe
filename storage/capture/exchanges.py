"""What the crawl's WARC files record, as plain values (the storage layer knows nothing of
Scrapy): an HTTP exchange as the client saw it (``Exchange``), or a request that got no
response (``FetchFailure``); and the WARC records of an exchange, built with warcio's
writer of the file they go into (``storage.capture.warc_file``): its response, or a
revisit of an identical payload or of the bytes a 304 says are unchanged, and its request.
"""

import hashlib
from base64 import b32encode
from dataclasses import dataclass, field
from datetime import datetime
from http import HTTPStatus
from io import BytesIO
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from storage.capture.cdxj import SERVER_NOT_MODIFIED

# hop-by-hop framing the HTTP client already undid: kept under another name, so a
# replay tool does not try to undo it a second time
UNDONE_FRAMING = ("transfer-encoding",)

Held = tuple[str, str, str]  # where a payload's bytes are: the URL, WARC date and record id of their response


@dataclass
class Exchange:
    """One HTTP exchange as the client saw it: the request as sent, the response's
    status, headers and body as received (before any decoding)."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int
    protocol: str
    response_headers: list[tuple[str, str]]
    body: bytes = field(repr=False)
    fetched_at: datetime
    ip_address: str | None = None


@dataclass
class FetchFailure:
    """A request that got no response: what the client reported instead."""

    url: str
    method: str
    error: str
    fetched_at: datetime


def payload_digest(body: bytes) -> str:
    """The WARC payload digest warcio writes: ``sha1:`` and base32."""
    return "sha1:" + b32encode(hashlib.sha1(body).digest()).decode()  # noqa: S324 - the digest WARC and CDXJ readers expect, not a security check


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _response_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(f"X-Pith-Orig-{k}" if k.lower() in UNDONE_FRAMING else k, v) for k, v in headers]


def _target(url: str) -> str:
    """The request target of an absolute URL: its path and query."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def response_http(exchange: Exchange) -> StatusAndHeaders:
    """The response's status line and headers, as a response or revisit record holds them."""
    return StatusAndHeaders(
        _status_line(exchange.status), _response_headers(exchange.response_headers), protocol=exchange.protocol
    )


def response_record(
    writer: WARCWriter, exchange: Exchange, digest: str, http: StatusAndHeaders, headers: dict[str, str]
) -> ArcWarcRecord:
    return writer.create_warc_record(
        exchange.url,
        "response",
        payload=BytesIO(exchange.body),
        length=len(exchange.body),
        http_headers=http,
        # the digest taken already: warcio then does not take it again
        warc_headers_dict={**headers, "WARC-Payload-Digest": digest},
    )


def revisit_record(
    writer: WARCWriter, url: str, digest: str, http: StatusAndHeaders, headers: dict[str, str], earlier: Held
) -> ArcWarcRecord:
    """The revisit record of a payload identical to one written ``earlier``."""
    uri, refers_date, refers_id = earlier
    record = writer.create_revisit_record(url, digest, uri, refers_date, http_headers=http, warc_headers_dict=headers)
    record.rec_headers.add_header("WARC-Refers-To", refers_id)
    return record


def not_modified_record(
    writer: WARCWriter,
    url: str,
    digest: str,
    date: str,
    http: StatusAndHeaders,
    headers: dict[str, str],
    held: Held | None,
) -> ArcWarcRecord:
    """The revisit record of a 304: it refers to the record that holds the bytes the
    server says are unchanged (``held``: the URL's latest payload capture the writer
    knows, this crawl's or a committed run's), so a replay tool that follows revisits
    finds them; unknown, it names the URL only."""
    uri, refers_date = held[:2] if held else (url, date)
    record = writer.create_revisit_record(url, digest, uri, refers_date, http_headers=http, warc_headers_dict=headers)
    record.rec_headers.replace_header("WARC-Profile", SERVER_NOT_MODIFIED)
    record.rec_headers.remove_header("WARC-Payload-Digest")  # a 304 carries no payload to digest
    if held:
        record.rec_headers.add_header("WARC-Refers-To", held[2])
    else:
        record.rec_headers.remove_header("WARC-Refers-To-Date")
    return record


def request_record(writer: WARCWriter, exchange: Exchange, date: str, concurrent_to: str) -> ArcWarcRecord:
    """The request record, concurrent to the response (or revisit) record ``concurrent_to``."""
    return writer.create_warc_record(
        exchange.url,
        "request",
        payload=BytesIO(exchange.request_body),
        length=len(exchange.request_body),
        http_headers=StatusAndHeaders(
            f"{exchange.method} {_target(exchange.url)} {exchange.protocol}",
            exchange.request_headers,
            is_http_request=True,
        ),
        warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": concurrent_to},
    )
