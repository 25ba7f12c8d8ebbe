"""What a bundle says about the citation graph around its record.

A graph snapshot names the records the paper cites (``references.sample``) and, in
bundles that carry one, a ``citations`` block: how many records cite it (``count``)
and a sample of them. Real registry bundles carry references only; who cites a record
is then shown on its record page alone.
"""

from typing import Any

from .numbers import PITH_NUMBER_RE


def latest_snapshot(bundle: dict[str, Any]) -> dict[str, Any]:
    """The ``graph_snapshot`` object of the bundle's last graph_snapshot event ({} if none)."""
    for event in reversed(bundle.get("events") or []):
        if isinstance(event, dict) and event.get("event_type") == "graph_snapshot":
            snapshot = (event.get("payload") or {}).get("graph_snapshot")
            return snapshot if isinstance(snapshot, dict) else {}
    return {}


def names_every_citer(bundle: dict[str, Any] | None) -> bool:
    """Whether the bundle itself names every record that cites it (its ``citations``
    sample is as long as its count), so its record page could name no other record."""
    citations = latest_snapshot(bundle).get("citations") if isinstance(bundle, dict) else None
    if not isinstance(citations, dict):
        return False
    count, sample = citations.get("count"), citations.get("sample")
    return isinstance(count, int) and isinstance(sample, list) and len(sample) >= count


def cited_numbers(snapshot: object) -> tuple[str, ...]:
    """The Pith numbers a graph snapshot's references sample names, once each, in order."""
    if not isinstance(snapshot, dict):
        return ()
    try:
        numbers = [item.get("pith_number") for item in snapshot["references"]["sample"]]
    except (KeyError, TypeError, AttributeError):
        return ()
    return tuple(dict.fromkeys(n for n in numbers if isinstance(n, str) and PITH_NUMBER_RE.match(n)))
