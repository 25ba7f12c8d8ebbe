"""Every answer bound to its question: a copy answers for the record it was asked
for only if it is that record.

A bundle proves that it is authentic, not that it is the one requested: a source
answering every request with one other record's valid, signed bundle would otherwise
have that record archived over and over while the records asked for silently go
missing. So a verified bundle whose ``pith_number`` does not name the record requested
(and a ``state.json`` whose ``pith_number`` is not its bundle's) is a bad copy from
its source, reason ``wrong_record``: kept in quarantine as evidence, counted against
the source, and the record asked for is fetched from another.
"""

from pith.numbers import PITH_NUMBER_RE
from pith.reasons import Reason
from pith.verify import Status, Verdict


def names(pith_number: object, suffix: str) -> bool:
    """Whether a full Pith number (``pith:YYYY:SUFFIX``) names the record ``suffix``."""
    match = PITH_NUMBER_RE.match(pith_number) if isinstance(pith_number, str) else None
    return match is not None and match[2] == suffix


def bound(verdict: Verdict, suffix: str | None) -> Verdict:
    """The verdict on a copy fetched as record ``suffix``: as it is, unless the copy
    verified as another record; then rejected, ``wrong_record``."""
    if not verdict.ok or suffix is None or names(verdict.pith_number, suffix):
        return verdict
    return Verdict(
        Status.REJECTED,
        Reason.WRONG_RECORD,
        "pith_number",
        f"asked for record {suffix}, served {verdict.pith_number}",
    )
