"""Split views: --cross-check fetches a sample of records from every mirror too; a copy
whose events fork from another resolver's (neither is a prefix of the other) is kept
as evidence, flagged equivocation in verifications naming both, and the run exits 1.
A mirror serving the same history, or an append-only extension of it, is not flagged.
End to end through two of the project's mirrors over real sockets."""

import json
from urllib.parse import urlsplit

import pytest

from pith.split_view import EXTENDS, FORK, SAME, Comparison, compare, event_ids
from pith_testkit.faults import FaultPlan
from storage.archive.layout import raw_bundle
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, extended
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

BUILT = "2026-06-10T00:00:00Z"


# --- the comparison ----------------------------------------------------------------


def cross_checked(tmp_path, corpus_dir, primary, second, sample: int, *args: str):
    """``crawl --cross-check SAMPLE --no-follow ARGS`` from ``primary`` with ``second`` as its mirror."""
    return run_cli_crawl(
        tmp_path,
        "--mirror",
        second.url,
        "--cross-check",
        str(sample),
        "--no-follow",
        *args,
        resolver=primary.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )


def test_copies_compare_by_their_event_ids_in_order():
    assert compare(["a", "b"], ["a", "b"]) == Comparison(SAME, 2)
    assert compare(["a"], ["a", "b", "c"]) == Comparison(EXTENDS, 1)
    assert compare(["a", "b", "c"], ["a"]) == Comparison(EXTENDS, 1)  # symmetric
    assert compare([], ["a"]) == Comparison(EXTENDS, 0)
    assert compare(["a", "b"], ["a", "x"]) == Comparison(FORK, 1)
    assert compare(["a", "b", "c"], ["a", "x"]) == Comparison(FORK, 1)  # longer, still not an extension
    assert compare(["b", "a"], ["a", "b"]) == Comparison(FORK, 0)  # the same events in another order


def test_minted_versions_compare_as_their_histories(corpus_dir):
    original = next(iter(corpus_raws(corpus_dir).values()))
    ids = {
        name: event_ids(json.loads(raw))
        for name, raw in {
            "original": original,
            "successor": extended(original, BUILT),
            "fork": extended(original, BUILT, replace_last=True),
        }.items()
    }
    assert compare(ids["original"], ids["successor"]).relation == EXTENDS
    assert compare(ids["original"], ids["fork"]) == Comparison(FORK, len(ids["original"]) - 1)
    assert compare(ids["successor"], ids["fork"]).relation == FORK


# --- crawls ----------------------------------------------------------------------------

SEEDS = 6


@pytest.fixture
def served(tmp_path, corpus_dir):
    """``serve(kinds)``: a folder of the first SEEDS corpus bundles as a second mirror
    serves them, each ``same`` (the bytes of the corpus), ``extension`` (an append-only
    successor) or ``fork`` (the last event replaced by another); returns the folder
    and the bytes served, by suffix."""
    raws = corpus_raws(corpus_dir)
    suffixes = sorted(raws)[:SEEDS]

    def serve(kinds: list[str]):
        folder = tmp_path / "second"
        folder.mkdir()
        bytes_served = {}
        for suffix, kind in zip(suffixes, kinds, strict=True):
            raw = raws[suffix]
            bytes_served[suffix] = {
                "same": raw,
                "extension": extended(raw, BUILT),
                "fork": extended(raw, BUILT, replace_last=True),
            }[kind]
            (folder / f"{suffix}.bundle.json").write_bytes(bytes_served[suffix])
        return folder, bytes_served

    return serve


def base(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.mark.slow
def test_a_mirror_serving_forked_histories_is_flagged(tmp_path, corpus_dir, mirror, served):
    kinds = ["fork", "same", "extension", "fork", "same", "extension"]
    folder, bytes_served = served(kinds)
    primary, second = mirror(), mirror(directory=folder)
    suffixes = sorted(bytes_served)
    result = cross_checked(tmp_path, corpus_dir, primary, second, 10, *suffixes)  # more than there are records

    assert result.returncode == 1, result.stderr[-3000:]
    assert (result.stat("cross_check/records"), result.stat("cross_check/copies")) == (SEEDS, SEEDS)
    assert (
        result.stat("cross_check/same"),
        result.stat("cross_check/extends"),
        result.stat("cross_check/fork"),
        result.stat("equivocations"),
        result.stat("rejected"),
    ) == (2, 2, 2, 2, 0)
    assert "2 split views: resolvers served forked histories of a record" in result.stderr
    assert (
        "cross-check: 6 records, 6 copies from other sources (0 failed): same 2, extends 2, split views 2"
        in result.stdout
    )
    # every record was fetched once from each resolver
    for server in (primary, second):
        assert sorted(r.record for r in server.requests if r.document == "bundle") == suffixes

    forks = {suffix for suffix, kind in zip(suffixes, kinds) if kind == "fork"}
    flagged = [row for row in read_rows(tmp_path / "archive", "verifications") if row["reason"] == "equivocation"]
    assert len(flagged) == 2
    archived = {row["bundle_sha256"]: row for row in read_rows(tmp_path / "archive", "records")}
    for row in flagged:
        suffix = row["pith_number"].rsplit(":", 1)[1]
        assert suffix in forks
        # the row names both resolvers and both copies: the mirror's, compared with the resolver's first
        assert (base(row["url"]), base(row["other_url"])) == (second.url, primary.url)
        assert row["status"] == "verified" and row["detail_path"] == "events"
        assert row["url"] in row["detail"] and row["other_url"] in row["detail"]
        assert "neither extends the other" in row["detail"]
        # both copies are kept, byte for byte, as evidence
        copies = {row["bundle_sha256"], row["other_bundle_sha256"]}
        assert len(copies) == 2 and copies <= set(archived)
        kept = {(tmp_path / "archive" / raw_bundle(archived[sha]["raw_sha256"])).read_bytes() for sha in copies}
        assert kept == {corpus_raws(corpus_dir)[suffix], bytes_served[suffix]}
        # the resolver's stays the record's current version
        assert (
            archived[row["other_bundle_sha256"]]["accepted_as_current"],
            archived[row["bundle_sha256"]]["accepted_as_current"],
        ) == (True, False)

    # the audit finds the archive whole: two verified copies of a record are no discrepancy
    [key_document] = (tmp_path / "archive" / "keys").glob("*.json")
    audit = run_cli(
        "audit",
        str(tmp_path / "archive"),
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        "--keyring",
        str(key_document),
    )
    assert audit.returncode == 0, audit.output


@pytest.mark.slow
def test_the_same_history_or_an_extension_is_not_a_split_view(tmp_path, corpus_dir, mirror, served):
    folder, bytes_served = served(["extension", "same", "same", "extension", "same", "same"])
    primary, second = mirror(), mirror(directory=folder)
    result = cross_checked(tmp_path, corpus_dir, primary, second, SEEDS, *sorted(bytes_served))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stat("cross_check/same"), result.stat("cross_check/extends"), result.stat("equivocations")) == (
        4,
        2,
        0,
    )
    assert "split views 0" in result.stdout and "split views:" not in result.stderr
    rows = read_rows(tmp_path / "archive", "verifications")
    assert not [row for row in rows if row["reason"] == "equivocation" or row["other_url"]]
    # identical bytes are one version (the second copy a duplicate); an extension is a new current version
    assert sum(row["duplicate"] for row in rows) == 4
    assert all(row["accepted_as_current"] for row in read_rows(tmp_path / "archive", "records"))
    assert len(read_rows(tmp_path / "archive", "records")) == SEEDS + 2


@pytest.mark.slow
def test_only_the_first_n_records_are_fetched_again(tmp_path, corpus_dir, mirror, served):
    folder, bytes_served = served(["fork"] * SEEDS)
    primary, second = mirror(), mirror(directory=folder)
    result = cross_checked(tmp_path, corpus_dir, primary, second, 2, *sorted(bytes_served))
    assert (result.stat("cross_check/records"), result.stat("equivocations"), result.returncode) == (2, 2, 1)
    # each record once (spread over both sources), and the 2 sampled ones again from the mirror
    bundles = [r for server in (primary, second) for r in server.requests if r.document == "bundle"]
    assert len(bundles) == SEEDS + 2
    assert result.stat("verified") == SEEDS + 2


@pytest.mark.slow
def test_a_mirror_that_cannot_serve_the_copy_costs_no_record(tmp_path, corpus_dir, mirror, served):
    folder, bytes_served = served(["same"] * SEEDS)
    primary = mirror()
    second = mirror(directory=folder, faults=FaultPlan(error_rate=1.0, error_status=500, paths=r"/bundle\.json$"))
    result = cross_checked(tmp_path, corpus_dir, primary, second, 3, *sorted(bytes_served), "-s", "RETRY_TIMES=0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        result.stat("cross_check/records"),
        result.stat("cross_check/failures"),
        result.stat("verified"),
        result.stat("equivocations"),
    ) == (3, 3, SEEDS, 0)
    assert "cross-check: 3 records, 0 copies from other sources (3 failed)" in result.stdout


@pytest.mark.slow
def test_a_recrawl_compares_records_that_did_not_change(tmp_path, corpus_dir, mirror, served):
    """Sampled bundles are fetched unconditionally: an unchanged record (304 otherwise)
    still has a body to compare with the mirror's."""
    folder, bytes_served = served(["fork"] * SEEDS)
    primary, second = mirror(), mirror(directory=folder)
    suffixes = sorted(bytes_served)
    first = run_cli_crawl(
        tmp_path,
        "--resolver",
        primary.url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        "--no-follow",
        "--out",
        str(tmp_path / "archive"),
        *suffixes,
    )
    assert (first.returncode, first.stat("archived")) == (0, SEEDS), first.stderr[-3000:]
    again = cross_checked(tmp_path, corpus_dir, primary, second, 2, *suffixes)
    assert again.returncode == 1, again.stderr[-3000:]
    assert (again.stat("cross_check/records"), again.stat("already_archived")) == (2, 2)
    # the other records are spread over both: unchanged at the resolver, or forks at the
    # mirror, kept as evidence, counted against it and never made current
    forked = again.stats.get(f"pith/hosts/{urlsplit(second.url).netloc}/forked", 0) - 2  # less the 2 copies
    assert again.stat("not_modified") + forked == SEEDS - 2
    assert again.stat("archived") == 2 + forked
    assert again.stat("equivocations") == 2 + forked  # a mirror's fork of the archive's version is a split view


@pytest.mark.slow
def test_a_spread_crawl_flags_a_mirror_serving_forks_as_split_views(tmp_path, corpus_dir, mirror, served):
    """No --cross-check: the mirror takes its share of the records, and each copy it
    serves that forks from the version the archive holds is a split view."""
    folder, bytes_served = served(["fork"] * SEEDS)
    primary, second = mirror(), mirror(directory=folder)
    suffixes = sorted(bytes_served)
    common = ["--keyring", str(corpus_dir / KEYRING_NAME), "--no-default-keys", "--no-follow"]
    common += ["--out", str(tmp_path / "archive"), "--resolver", primary.url]
    first = run_cli_crawl(tmp_path, *common, *suffixes)
    assert first.returncode == 0, first.stderr[-3000:]
    current = {row["pith_number"]: row["bundle_sha256"] for row in read_rows(tmp_path / "archive", "records")}

    again = run_cli_crawl(tmp_path, *common, "--mirror", second.url, *suffixes)
    forked = again.stats.get(f"pith/hosts/{urlsplit(second.url).netloc}/forked", 0)
    assert forked >= 1, again.stdout
    assert (again.returncode, again.stat("equivocations"), again.stat("archived")) == (1, forked, forked)
    assert "split views: resolvers served forked histories" in again.stderr
    flagged = [row for row in read_rows(tmp_path / "archive", "verifications") if row["reason"] == "equivocation"]
    assert len(flagged) == forked
    for row in flagged:
        assert base(row["url"]) == second.url and row["other_url"] is None
        assert row["other_bundle_sha256"] == current[row["pith_number"]]  # the version the archive holds
        assert "forks from the archive's current version" in row["detail"]
    currents = {row["bundle_sha256"]: row["accepted_as_current"] for row in read_rows(tmp_path / "archive", "records")}
    assert all(currents[sha] for sha in current.values())  # the resolver's versions stay current
