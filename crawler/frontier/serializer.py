"""The tasks of a shared frontier, and scrapy-redis's SCHEDULER_SERIALIZER for them.

A queued task names what to fetch, never how: a few JSON fields (its kind, its record,
alias or sitemap path on one of the worker's own resolver and mirrors, and its depth).
The worker rebuilds the request with its spider's own builders (``task_request``):
method, headers, meta and callbacks are never read from Redis. Whoever can write to the
Redis server can queue records of the crawl's resolver, never run code, reach another
host or shape a request; an entry that does not fit is refused by name (RefusedEntry).
"""

import re
from urllib.parse import urlsplit

import orjson
from scrapy import Request

from pith.numbers import SUFFIX_RE

from ..meta_keys import Meta
from ..scheduling.claims import BUNDLE, PAGE
from ..seeds import Seed, SeedError, parse_seed
from .errors import RefusedEntry, RequestNotSerializable

# kind -> (its task prefix, its fields). A base is one of the worker's own resolver and
# mirrors, never a URL the entry chooses.
KINDS = {
    "bundle": (BUNDLE, ("suffix", "depth")),
    "page": (PAGE, ("suffix", "depth")),
    "alias": ("alias", ("alias", "depth")),
    "sitemap": ("sitemap", ("base", "path")),
}
KIND_OF = {prefix: kind for kind, (prefix, _) in KINDS.items()}
_ANY_FIELD = {"kind"}.union(*(fields for _, fields in KINDS.values()))
MAX_ENTRY = 4096  # bytes: a task is a few names, the longest a sitemap path
MAX_DEPTH = 100_000  # link hops from the seeds
_SITEMAP_PATH = re.compile(r"/[!-~]*")  # printable ASCII from the base's root on


def check_task(entry: object) -> dict:
    """``entry`` when it is a task of the schema above, field by field; else RefusedEntry."""
    if not isinstance(entry, dict):
        raise RefusedEntry("not_an_object", f"a JSON {type(entry).__name__}")
    kind = entry.get("kind")
    fields = KINDS[kind][1] if isinstance(kind, str) and kind in KINDS else ()
    unknown = set(entry) - (_ANY_FIELD if not fields else {"kind", *fields})
    if unknown:
        raise RefusedEntry("unknown_field", sorted(unknown))
    if not fields:
        raise RefusedEntry("unknown_kind", repr(kind))
    missing = [field for field in fields if field not in entry]
    if missing:
        raise RefusedEntry("missing_field", missing)
    for field in fields:
        if not isinstance(entry[field], int if field == "depth" else str) or isinstance(entry[field], bool):
            raise RefusedEntry("wrong_type", f"{field} is a {type(entry[field]).__name__}")
    if "depth" in entry and not 0 <= entry["depth"] <= MAX_DEPTH:
        raise RefusedEntry("bad_depth", entry["depth"])
    if "suffix" in entry and not SUFFIX_RE.fullmatch(entry["suffix"]):
        raise RefusedEntry("bad_suffix", repr(entry["suffix"]))
    if "alias" in entry and not _is_alias(entry["alias"]):
        raise RefusedEntry("bad_alias", repr(entry["alias"]))
    if "path" in entry and not (
        _SITEMAP_PATH.fullmatch(entry["path"]) and urlsplit(entry["path"]).path.endswith(".xml")
    ):
        raise RefusedEntry("bad_path", repr(entry["path"]))
    return entry


def _is_alias(text: str) -> bool:
    try:
        return parse_seed(text) == Seed("alias", text)
    except SeedError:
        return False


def task_of(request: Request, sources: list[str]) -> dict:
    """The task a request opens (``meta[Meta.TASK]``, and its depth), as queued;
    ``sources``: the worker's resolver and mirrors, one of which a sitemap must be on."""
    prefix, _, value = request.meta[Meta.TASK].partition(":")
    kind = KIND_OF.get(prefix)
    if kind == "sitemap":
        base = max((b for b in sources if value.startswith(b + "/")), key=len, default=None)
        if base is None:
            raise RequestNotSerializable(f"the sitemap {value} is on none of the crawl's resolvers and mirrors")
        return {"kind": kind, "base": base, "path": value[len(base) :]}
    if kind is None:
        raise RequestNotSerializable(f"no task kind of ours: {request.meta['pith_task']!r}")
    return {"kind": kind, KINDS[kind][1][0]: value, "depth": request.meta.get(Meta.DEPTH, 0)}


def dumps(task: dict) -> bytes:
    return orjson.dumps(check_task(task))


def loads(data: bytes) -> dict:
    """The task ``dumps`` wrote, checked: what Redis holds is input like any other, written
    by whoever can reach that Redis (RefusedEntry, naming the rule it breaks)."""
    if len(data) > MAX_ENTRY:
        raise RefusedEntry("too_large", f"{len(data)} bytes, more than {MAX_ENTRY}")
    try:
        return check_task(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        raise RefusedEntry("not_json", exc) from None
