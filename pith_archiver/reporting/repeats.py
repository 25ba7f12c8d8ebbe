"""Findings that repeat, told once: ``audit`` and ``verify`` print the first of each
kind where it is found and, before their summary, one line with how many there were
and what fixes them (600 bundles signed by a key not pinned are one fix, not 600
lines to read). With -v, and in --json, every finding keeps its own line; the exit
status never depends on how findings are printed."""

from collections import Counter

from pith.reasons import Reason

# what a reason says of the documents that draw it, and how a user fixes it
FIXES = {
    Reason.UNKNOWN_KEY: (
        "signed by a key not pinned",
        "pin it with --keyring FILE (a keyring holding that key, its fingerprint checked out of band)",
    ),
}


class Repeats:
    """Findings counted by kind: what was found wrong (a noun: bundle, feed...), the
    reason and the detail. ``every``: each finding is printed (-v, --json)."""

    def __init__(self, every: bool) -> None:
        self.every = every
        self.kinds: Counter[tuple[str, str, str]] = Counter()

    def shown(self, noun: str, reason: str, what: str) -> bool:
        """Count one finding; whether its own line is printed: the first of its kind,
        or every one."""
        kind = (noun, reason, what)
        self.kinds[kind] += 1
        return self.every or self.kinds[kind] == 1

    def lines(self) -> list[str]:
        """One line per kind found more than once or with a known fix, by count."""
        out = []
        for (noun, reason, what), count in self.kinds.most_common():
            nouns = noun if count == 1 else f"{noun}s"
            listed = "" if self.every or count == 1 else "; -v lists each"
            if reason in FIXES:
                said, fix = FIXES[Reason(reason)]
                out.append(f"{count} {nouns} {said} ({what}): {fix}{listed}")
            elif listed:
                out.append(f"{count} {nouns} rejected alike ({what}), the first shown above{listed}")
        return out
