"""Which committed record a name a person gives means, by the archive's own tables
(the names the crawl takes as seeds, which the resolver resolves under ``/pith/``): the
first 8, 12 or 16 characters of a suffix (a short Pith number) by the ``records``
table's numbers, an arXiv id (with or without its version) or a DOI by the
``aliases`` table's values, case-insensitively. An alias several versions of a paper
share names the latest (the highest source version), as the resolver's does."""

import re
from collections.abc import Iterator
from typing import Any

from pith.numbers import SHORT_LENGTHS, suffix_of
from storage.archive.reader import CommittedArchive, table_batches

PREFIX_RE = re.compile(r"^[A-Z2-7]+$")


def records_named(archive: CommittedArchive, name: str) -> list[str]:
    """The full Pith numbers of the committed records ``name`` names, sorted: none,
    one, or several when they share the prefix given."""
    if len(name) in SHORT_LENGTHS and PREFIX_RE.match(name):
        return sorted({number for (number,) in _rows(archive, "records", []) if suffix_of(number).startswith(name)})
    wanted = name.casefold()
    aliased = {number for number, alias in _rows(archive, "aliases", ["alias_value"]) if _folded(alias) == wanted}
    if len(aliased) < 2:
        return sorted(aliased)
    versions = _rows(archive, "records", ["source_version", "built_at"])
    ranks = [(version or 0, built.isoformat() if built else "", n) for n, version, built in versions if n in aliased]
    return [max(ranks)[2]] if ranks else sorted(aliased)


def _folded(value: object) -> str | None:
    return value.casefold() if isinstance(value, str) else None


def _rows(archive: CommittedArchive, table: str, columns: list[str]) -> Iterator[tuple[Any, ...]]:
    """``(pith_number, *columns)`` of every committed row of ``table``."""
    wanted = ["pith_number", *columns]
    for entry in archive.table_files(table):
        for batch in table_batches(archive.store, entry, wanted):
            yield from zip(*(batch.column(name).to_pylist() for name in wanted))
