"""A conforming Pith mirror on loopback: a signed test corpus (``corpus``), the
record source and catalog it is served from (``source``, ``catalog``), the resolver
layout (``resolver``, ``pages``), a small asyncio HTTP/1.1 server (``http``,
``server``, ``runner``) and fault injection for tests (``faults``)."""
