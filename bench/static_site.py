"""A generated corpus laid out as plain files in the resolver's paths, for a mirror that
is not the project's own (``python -m http.server`` over it: no gzip, no ETag, no
rendering cache, a redirect from ``/pith/<ID>`` to ``/pith/<ID>/``).

    python bench/static_site.py CORPUS_DIR OUT_DIR

Per record: ``pith/<ID>/bundle.json`` (the bundle's bytes, hard-linked), ``state.json``
and ``index.html`` (the record page the project's mirror renders, with its "cites" and
"cited by" links); plus ``robots.txt`` and ``sitemap.xml``. No mirror list.
"""

import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pith.links import REGISTRY_BASE  # noqa: E402
from storage.serving.http import Request  # noqa: E402
from storage.serving.resolver import ResolverSite  # noqa: E402
from storage.serving.source import CorpusDirectory, bundle_name  # noqa: E402


def get(resolver: ResolverSite, path: str) -> bytes:
    response = resolver.respond(Request("GET", path, path, {}, "HTTP/1.1", {}))
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status}")
    return response.body


def lay_out(corpus: Path, out: Path) -> list[str]:
    """Write the static site of ``corpus`` into ``out`` (replaced); returns the suffixes."""
    source = CorpusDirectory(corpus)
    resolver = ResolverSite(source, REGISTRY_BASE)
    shutil.rmtree(out, ignore_errors=True)
    for suffix in source.catalog.suffixes:
        folder = out / "pith" / suffix
        folder.mkdir(parents=True)
        os.link(source.bundles_dir / bundle_name(suffix), folder / "bundle.json")
        (folder / "state.json").write_bytes(get(resolver, f"/pith/{suffix}/state.json"))
        (folder / "index.html").write_bytes(get(resolver, f"/pith/{suffix}"))
    (out / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (out / "sitemap.xml").write_bytes(get(resolver, "/sitemap.xml"))
    return list(source.catalog.suffixes)


if __name__ == "__main__":
    print(f"{len(lay_out(Path(sys.argv[1]), Path(sys.argv[2])))} records laid out in {sys.argv[2]}")
