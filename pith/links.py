"""The registry's URL layout: where a record's resolver page, bundle and state live
under a base URL. Mirrors serve the same layout, so one function names them all."""

from typing import Any

REGISTRY_BASE = "https://pith.science"
# What the mirror list (``/pith-mirrors.json``: the sites serving this layout) says it is.
# The registry's wire value, kept as it is for every reader, though here a "manifest" is
# only the archive's signed run manifest.
MIRROR_LIST_TYPE = "pith_mirror_manifest"


def links_for(suffix: str, base: str = REGISTRY_BASE) -> dict[str, Any]:
    return {
        "resolver": f"{base}/pith/{suffix}",
        "bundle": f"{base}/pith/{suffix}/bundle.json",
        "state": f"{base}/pith/{suffix}/state.json",
        "well_known_bundle": f"{base}/.well-known/pith/{suffix}/bundle.json",
    }
