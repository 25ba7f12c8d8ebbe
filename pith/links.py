"""The registry's URL layout: where a record's resolver page, bundle and state live
under a base URL. Mirrors serve the same layout, so one function names them all."""

from typing import Any

REGISTRY_BASE = "https://pith.science"


def links_for(suffix: str, base: str = REGISTRY_BASE) -> dict[str, Any]:
    return {
        "resolver": f"{base}/pith/{suffix}",
        "bundle": f"{base}/pith/{suffix}/bundle.json",
        "state": f"{base}/pith/{suffix}/state.json",
        "well_known_bundle": f"{base}/.well-known/pith/{suffix}/bundle.json",
    }
