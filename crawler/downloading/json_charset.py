"""UTF-8 declared on JSON responses that name no charset, so that Scrapy never guesses it."""

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.http import Response

from ..crawl_config import pith_crawl_only


class JsonCharsetMiddleware:
    """Declare UTF-8 on JSON responses that name no charset (RFC 8259: JSON is UTF-8).

    Without it, Scrapy's decompression middleware copies ``response.encoding`` on every
    compressed response, which for a charset-less ``application/json`` body runs a full
    charset detection: milliseconds per bundle, more than verifying it. It sits just
    before HttpCompressionMiddleware in the response path and never touches the body.
    """

    JSON_TYPES = (b"application/json", b"application/ld+json")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "JsonCharsetMiddleware":
        pith_crawl_only(crawler)
        return cls()

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        content_type = response.headers.get(b"Content-Type") or b""
        if content_type.split(b";")[0].strip().lower() in self.JSON_TYPES and b"charset" not in content_type.lower():
            response.headers[b"Content-Type"] = content_type + b"; charset=utf-8"
        return response
