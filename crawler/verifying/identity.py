"""Every answer bound to its question: a copy answers for the record it was asked
for only if it is that record.

A bundle proves that it is authentic, not that it is the one requested: a source
answering every request with one other record's valid, signed bundle would otherwise
have that record archived over and over while the records asked for silently go
missing. So a verified bundle whose ``pith_number`` does not name the record requested
(or, for a seed given as a short number, arXiv id or DOI, that does not carry it), and
a ``state.json`` whose ``pith_number`` is not its bundle's, is a bad copy from
its source, reason ``wrong_record``: kept in quarantine as evidence, counted against
the source, and the record asked for is fetched from another.
"""

import re

from pith.numbers import PITH_NUMBER_RE
from pith.reasons import Reason
from pith.verdict import Status, Verdict

SHORT_ALIAS_RE = re.compile(r"^[A-Z2-7]{8}(?:[A-Z2-7]{4}){0,2}$")  # a short number's 8, 12 or 16 characters


def names(pith_number: object, suffix: str) -> bool:
    """Whether a full Pith number (``pith:YYYY:SUFFIX``) names the record ``suffix``."""
    match = PITH_NUMBER_RE.match(pith_number) if isinstance(pith_number, str) else None
    return match is not None and match[2] == suffix


def carries(bundle: object, suffix: str, alias: str) -> bool:
    """Whether a record answers to ``alias`` (a seed's short number, arXiv id or
    DOI): a short number is the start of its suffix, anything else one of its
    ``source_aliases`` (DOIs and arXiv ids compare case-insensitively)."""
    if SHORT_ALIAS_RE.match(alias):
        return suffix.startswith(alias)
    entries = bundle.get("source_aliases") if isinstance(bundle, dict) else None
    wanted = alias.lower()
    return any(isinstance(entry, dict) and str(entry.get("alias_value")).lower() == wanted for entry in entries or ())


def bound(verdict: Verdict, suffix: str | None, alias: str | None = None) -> Verdict:
    """The verdict on a copy fetched as record ``suffix`` (which the resolver gave for
    ``alias``, when a seed named the record by one): as it is, unless the copy verified
    as another record, or as one that does not carry the alias; then rejected,
    ``wrong_record``."""
    if not verdict.ok or suffix is None:
        return verdict
    if not names(verdict.pith_number, suffix):
        detail = f"asked for record {suffix}, served {verdict.pith_number}"
    elif alias is not None and not carries(verdict.bundle, suffix, alias):
        detail = f"asked for {alias}, resolved to {verdict.pith_number}, which does not carry it"
    else:
        return verdict
    return Verdict(Status.REJECTED, Reason.WRONG_RECORD, "pith_number", detail)
