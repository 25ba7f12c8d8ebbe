"""What a crawl's full summary says besides its counts, each note from the crawl's
Scrapy stats alone: what changed at the registry, what the listing's dates saved, state
kept outside the archive that was dropped, dates in the future, and the sources."""

from crawler.stat_keys import BAD_COPIES, Stat, StatFamily, read_family

from ..output import counted


def registry_changes(stats: dict) -> list[str]:
    """What changed at the registry, each a line saying what to do: records archived with
    a merge rule only inferred, a key the registry announces unpinned, bundles signed by
    unpinned keys (most of them: a rotation), versions this archiver does not know."""
    lines = []
    inferred = stats.get(Stat.MERGE_INFERRED, 0)
    if inferred:
        types = reason_counts(read_family(stats, StatFamily.MERGE_INFERRED))
        differs = stats.get(Stat.MERGE_INFERRED_DIFFERS, 0)
        lines.append(
            f"merge inferred: {inferred} verified bundles hold event types whose merge rule is only "
            f"inferred ({types}); archived with merge_confirmed false"
            + (f", {differs} with a signed state the inferred rule does not give" if differs else "")
        )
    announced = read_family(stats, StatFamily.ANNOUNCED_UNPINNED)
    named = ", ".join(f"{key_id} (fingerprint {fingerprint})" for key_id, fingerprint in sorted(announced.items()))
    unknown = read_family(stats, StatFamily.UNKNOWN_KEYS)
    rejected_unknown, fetched = sum(unknown.values()), stats.get(Stat.BUNDLES_FETCHED, 0)
    if rejected_unknown and rejected_unknown * 2 > fetched:
        lines.append(
            f"key rotation: {rejected_unknown} of {fetched} bundles are signed by keys not pinned "
            f"({reason_counts(unknown)}): the registry has probably rotated its key"
            + (f"; it announces {named}" if named else "")
            + ". Check the new key out of band, pin it (pith-archiver keys pin) and crawl again"
        )
    elif named:
        lines.append(
            f"unpinned key: the registry announces {named}; bundles it signs are rejected "
            "until it is pinned (pith-archiver keys pin)"
        )
    versions = read_family(stats, StatFamily.UNSUPPORTED_VERSIONS)
    if versions:
        lines.append(
            f"unknown versions: {reason_counts(versions)}: this archiver does not know them; upgrade "
            "pith-archiver (the bundles wait in quarantine/, nothing was guessed)"
        )
    return lines


CACHES = {
    "validators": "validators dropped",
    "job": "the job's state dropped",
    "frontier": "the frontier's claims dropped",
    "listings": "how far the listings were read dropped",
}


def asked_parts(stats: dict) -> str:
    """Why the held records asked were asked, each counted once."""
    parts = [
        (Stat.ASKED_DATED, "dated changed"),
        (Stat.RECHECK_SAMPLE, "sampled"),
        (Stat.RECHECK_DUE, "due by --recheck-after"),
        (Stat.ASKED_SWEPT, "swept"),
    ]
    return ", ".join(f"{stats.get(key, 0)} {what}" for key, what in parts)


def dates_line(stats: dict) -> str:
    """What the listing's dates saved, or that they were not trusted, with every held
    record counted once: not asked, or asked for one reason (one line; "" in a crawl that
    did not use them: a first crawl, no sitemap, or no dates)."""
    held = stats.get(Stat.RECORDS_HELD, 0)
    if not held:
        return ""
    skipped = stats.get(Stat.SKIPPED_BY_DATE, 0)
    counts = f"of {counted(held, 'held record')}, {skipped} not asked and {held - skipped} asked ({asked_parts(stats)})"
    if stats.get(Stat.LASTMOD_DISTRUSTED):
        lies = stats.get(Stat.LASTMOD_LIES, 0)
        return (
            "dates not trusted: the resolver's sitemaps or Change Lists dated "
            + (
                f"{counted(lies, 'changed record')} as unchanged"
                if lies
                else "changed records as unchanged in an earlier crawl"
            )
            + f"; {counts}; later crawls ask every record until one finds the dates honest"
        )
    return f"dates trusted: {counts}; none of the records asked to check the dates had changed unlisted"


def quiet_dates(stats: dict) -> str:
    """The dates' note in the quiet summary: trusted or not, and how the held records
    were asked."""
    held, skipped = stats.get(Stat.RECORDS_HELD, 0), stats.get(Stat.SKIPPED_BY_DATE, 0)
    if not held:
        return ""
    trust = "dates not trusted" if stats.get(Stat.LASTMOD_DISTRUSTED) else "dates trusted"
    return f"{trust}: {skipped} of {held} held not asked, {asked_parts(stats)}"


def future_line(stats: dict) -> str:
    """Dates the source gave later than this machine's clock allows ("" when none)."""
    future = stats.get(Stat.FUTURE_DATES, 0)
    if not future:
        return ""
    return (
        f"dates in the future: {counted(future, 'date')} the resolver gave were later than this machine's "
        "clock plus a day, and counted as no date (their records asked)"
    )


def cache_note(stats: dict) -> str:
    """One line when state kept outside the archive (a cache of it) did not match the
    archive and was dropped, so its records were crawled again; "" when it matched."""
    dropped = [what for cache, what in CACHES.items() if stats.get(StatFamily.CACHE_DROPPED + cache)]
    return f"cache did not match the archive: {', '.join(dropped)}" if dropped else ""


def hosts_line(stats: dict) -> str:
    """Requests and records per source, when the crawl spread over more than one
    (crawler.downloading.spread), with why a source could not be reached; "" otherwise."""
    hosts: dict[str, dict] = {}
    for key, value in read_family(stats, StatFamily.HOSTS).items():
        host, _, what = key.rpartition("/")
        hosts.setdefault(host, {})[what] = value
    if len(hosts) < 2:
        return ""
    parts, causes = [], read_family(stats, StatFamily.UNREACHABLE)
    for host, counts in sorted(hosts.items()):
        bad = ", ".join(
            [f"{what} {counts[what]}" for what in BAD_COPIES if counts.get(what)]
            + ["demoted"] * bool(counts.get("demoted"))
            + ([f"last error: {causes[host]}"] if host in causes else [])
        )
        parts.append(
            f"{host} {counted(counts.get('requests', 0), 'request')}, {counted(counts.get('records', 0), 'record')}"
            + (f" ({bad})" if bad else "")
        )
    demoted = stats.get(Stat.MIRRORS_DEMOTED, 0)
    return "sources: " + "; ".join(parts) + (f"; {demoted} mirrors demoted" if demoted else "")


def reason_counts(reasons: dict) -> str:
    """``reason count`` pairs, by reason."""
    return ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))


def summary_notes(stats: dict) -> list[str]:
    """The full summary's notes after the counts: what changed at the registry, caches
    dropped, what the listing's dates saved, dates in the future, and the sources."""
    found = [*registry_changes(stats), cache_note(stats), dates_line(stats), future_line(stats), hosts_line(stats)]
    return [note for note in found if note]
