"""A model-based test of scheduled re-runs: Hypothesis's stateful testing drives a
scripted registry (pith_testkit.scripted, behind nginx) through many simulated weeks,
each week one real ``pith-archiver crawl ... sitemap`` into one archive with the
machine's clock set by libfaketime. It draws changes the listings tell of or not;
record and index dates that are honest, frozen, absent or in the far future; Change
Lists whose entries are honest, omitted or dated in the future; and clock jumps forward
and back. After every run it checks, against its own model of what changed when:

- nothing archived is lost (every version archived before is still there);
- every change the run's listings made visible is archived by that run, and a run that
  found a hidden change (a lie) archived every change pending;
- no change waits past ``--recheck-after`` (30) days of simulated time;
- each held record is counted once: not asked, or asked for one reason;
- an honest week (honest listings, the clock right, no record due) costs at most
  1.05 x changed + 2% of the records + the listings + 10 requests.

The bounded profile runs in CI; ``PITH_MODEL_PROFILE=long`` runs many more weeks
(``bench/rerun_model.py``; bench/RESULTS.md gives the figures)."""

import json
import os
import shutil
import tempfile
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from pith.checkpoint import log_origin
from pith.signing import Signer
from pith_testkit.scripted import Listing
from storage.archive.folder_store import LocalStore
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.scripted_site import START, Site
from tests.plugins.tables import read_rows
from tests.test_peer_sync import audit, raw_objects, sync

pytestmark = pytest.mark.slow

RECORDS = 160
RECHECK_AFTER = timedelta(days=30)
LONG = os.environ.get("PITH_MODEL_PROFILE") == "long"
TIMEOUT = 5400 if LONG else 600  # seconds for one test: a long profile runs a hundred crawls or more
DATES = ("honest", "frozen", "absent", "future")
PROFILES = {
    "ci": settings(max_examples=3, stateful_step_count=7),
    "long": settings(max_examples=8, stateful_step_count=12),
}


def dates_of(result) -> str:
    """The summary's line on the dates: how each held record was asked."""
    return next((line for line in result.stdout.splitlines() if line.startswith("dates")), "")


class WeeklyRuns(RuleBasedStateMachine):
    """One registry and one archive; the rules change the first and run the second."""

    tally: Counter = Counter()  # over every example: runs, honest weeks, lies found, clock jumps, changes
    fixtures: dict = {}  # the test's nginx fixture and folder ("nginx", "tmp"), set before the machine runs

    def __init__(self) -> None:
        super().__init__()
        self.home = Path(tempfile.mkdtemp(prefix="weeks-", dir=self.fixtures["tmp"]))
        self.site = Site(self.home, self.fixtures["nginx"], RECORDS)
        self.registry = self.site.registry
        self.now = START
        self.jump = timedelta(0)
        self.listing = Listing()
        self.pending: dict[str, datetime] = {}  # record -> when its oldest unarchived change was made
        self.told: set[str] = set()  # pending records whose every change the listings were told of
        self.changed_since_run: set[str] = set()
        self.archived: dict[str, set[str]] = {}  # record -> every version's sha-256 archived
        self.last_full_ask = START  # when every held record was last asked (no record is due before +30 days)
        self.clock_was_wrong = False
        self.told_all = True  # this week's changes were all told of
        self.hostile_at: datetime | None = None  # the last week whose listings lied, or whose clock was off
        self.lists_tainted = False  # a Change List page once named a change in the future: pages stay
        self.future_named: set[str] = set()  # records such a page names: asked whenever it is read

    @initialize(change_lists=st.booleans())
    def first_run(self, change_lists: bool) -> None:
        self.listing = Listing(change_lists=change_lists)
        self.registry.publish(self.listing, self.now)
        result, _ = self.site.crawl(self.now)
        self.archived = self._archived()
        assert len(self.archived) == RECORDS and not self.site.pending(), result.stdout

    # --- a week: the registry changes, its listings say something, the run comes -------
    @rule(
        records=st.sets(st.integers(0, RECORDS - 1), max_size=12),
        told=st.booleans(),
        record_dates=st.sampled_from(DATES),
        index_dates=st.sampled_from(DATES),
        change_dates=st.sampled_from(["honest", "future"]),
        jump=st.sampled_from([timedelta(0)] * 4 + [timedelta(days=4 * 365), timedelta(days=-365), timedelta(days=3)]),
        days=st.sampled_from([7, 7, 7, 14]),
    )
    def a_week(
        self, records: set[int], told: bool, record_dates, index_dates, change_dates, jump: timedelta, days: int
    ) -> None:
        """``records`` change (the listings ``told`` of it or not), the listings date
        records and child sitemaps as drawn, and the run ``days`` later has its clock off
        by ``jump`` (that run only)."""
        self._change(records, told)
        self.listing = Listing(
            record_dates, index_dates, change_lists=self.listing.change_lists, change_dates=change_dates
        )
        self.jump = jump
        self.told_all = told or not records
        honest = (record_dates, index_dates, change_dates) == ("honest", "honest", "honest") and self.told_all
        if not honest or jump != timedelta(0):
            self.hostile_at = self.now + timedelta(days=days)
        self.lists_tainted |= self.listing.change_lists and change_dates == "future"
        if self.listing.change_lists and change_dates == "future" and told:
            self.future_named |= {self.registry.suffixes[i] for i in records}
        try:
            self._run(days)
        except AssertionError as exc:  # kept whole for bench/rerun_model.py: a flaky replay hides it
            if os.environ.get("PITH_MODEL_REPORT"):
                with (Path(os.environ["PITH_MODEL_REPORT"]) / "failures.log").open("a") as log:
                    log.write(f"{self.now} {self.listing} jump {self.jump}: {exc}\n\n")
            raise

    def _change(self, records: set[int], told: bool) -> None:
        at = self.now + timedelta(hours=1)
        for index in sorted(records):
            suffix = self.registry.suffixes[index]
            self.registry.change(suffix, at, told=told)
            if suffix not in self.pending:
                self.pending[suffix] = at
                self.told.add(suffix)
            if not told:
                self.told.discard(suffix)
            self.changed_since_run.add(suffix)

    def _run(self, days: int) -> None:
        self.now += timedelta(days=days)
        self.registry.publish(self.listing, self.now)
        visible = self._visible()
        result, requests = self.site.crawl(self.now + self.jump)
        self.tally.update(runs=1, changes=len(self.changed_since_run), clock_jumps=self.jump != timedelta(0))
        archived = self._archived()
        for suffix, versions in self.archived.items():  # nothing archived is lost
            assert versions <= archived.get(suffix, set()), suffix
        pending = self.site.pending()
        assert not (visible & pending), f"visible changes not archived: {sorted(visible & pending)}"
        newly = {s for s in self.pending if s not in pending}
        hidden_found = newly - visible - self.future_named  # asked only by the sample or as due: a lie
        if hidden_found or result.stat("lastmod_distrusted"):
            assert not pending, f"a lie was found, yet {len(pending)} changes wait: {result.stdout}"
            self.tally.update(lies_acted_on=bool(hidden_found))
        for suffix in self.pending.keys() & pending:
            assert self.now - self.pending[suffix] <= RECHECK_AFTER, f"{suffix} waited past --recheck-after"
        for suffix in self.pending.keys() - pending:
            waited = (self.now - self.pending[suffix]).days
            self.tally["longest_wait_days"] = max(self.tally["longest_wait_days"], waited)
        self._check_counts(result)
        if self._honest_week(result):
            listings = sum(1 for line in requests if "/pith/" not in line)
            budget = 1.05 * len(self.changed_since_run) + 0.02 * RECORDS + listings + 10
            assert result.stat("recheck_due") == 0, result.stdout
            assert len(requests) <= budget, f"{len(requests)} requests > {budget}: {dates_of(result)}"
            self.tally.update(honest_weeks=1)
            self.tally["honest_requests"] += len(requests)
            self.tally["honest_budget"] += int(budget)
        if result.stat("records_held") and result.stat("records_skipped_by_date") == 0:
            self.last_full_ask = self.now
        self.clock_was_wrong = self.jump != timedelta(0)
        self.jump = timedelta(0)
        self.archived = archived
        self.pending = {s: t for s, t in self.pending.items() if s in pending}
        self.told &= set(self.pending)
        self.changed_since_run = set()

    def _visible(self) -> set[str]:
        """The pending changes this run's listings tell of, read as a trusting run reads
        them: the Change Lists name every change told (dated or not); the sitemaps date
        a change told honestly, or give it no usable date, in a child the index does not
        freeze."""
        if self.listing.change_lists:
            return set(self.told)
        if self.listing.index_dates == "frozen":
            return set()
        if self.listing.record_dates in ("absent", "future"):
            return set(self.pending)
        return set(self.told) if self.listing.record_dates == "honest" else set()

    def _honest_week(self, result) -> bool:
        """A week whose budget is checked: its listings honest and told of every change,
        the clock right, and nothing left of a hostile week (a sitemap lie is gone once a
        run has asked every record; a Change List page naming a change in the future is
        read again as long as it is listed), no record due."""
        return (
            (self.hostile_at is None or self.last_full_ask >= self.hostile_at)
            and not (self.listing.change_lists and self.lists_tainted)
            and not self.clock_was_wrong
            and not result.stat("lastmod_distrusted")
            and self.now - self.last_full_ask < RECHECK_AFTER
        )

    def _check_counts(self, result) -> None:
        held = result.stat("records_held")
        asked = ("records_dated_changed", "recheck_sample", "recheck_due", "records_swept")
        assert held == RECORDS, result.stdout
        assert result.stat("records_skipped_by_date") + sum(result.stat(key) for key in asked) == held

    def _archived(self) -> dict[str, set[str]]:
        """Every version the archive's records table holds, per record."""
        versions: dict[str, set[str]] = {}
        for row in read_rows(self.site.archive, "records"):
            versions.setdefault(row["pith_number"].rpartition(":")[2], set()).add(row["raw_sha256"])
        return versions

    def teardown(self) -> None:
        """The archive the weeks left audits clean: every object, manifest and log."""
        result = run_cli("audit", self.site.archive, "--keyring", self.registry.keyring, home=self.home)
        assert result.returncode == 0, result.output[-3000:]


@pytest.mark.timeout(TIMEOUT)
def test_weeks_of_lies_clock_jumps_and_changes_never_cost_a_record(nginx, tmp_path):
    name = os.environ.get("PITH_MODEL_PROFILE", "ci")
    WeeklyRuns.fixtures, WeeklyRuns.tally = {"nginx": nginx, "tmp": tmp_path}, Counter()
    profile = PROFILES[name]
    run_state_machine_as_test(
        WeeklyRuns,
        settings=settings(
            profile,
            deadline=None,
            derandomize=name == "ci",
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking real crawls takes hours
        ),
    )
    assert WeeklyRuns.tally["runs"] >= profile.max_examples  # the machine ran weeks, not only its first crawl
    report(WeeklyRuns.tally, "weeks")


def report(tally: Counter, name: str) -> None:
    """What the machine did, for bench/rerun_model.py (``PITH_MODEL_REPORT``: a folder)."""
    if os.environ.get("PITH_MODEL_REPORT"):
        (Path(os.environ["PITH_MODEL_REPORT"]) / f"{name}.json").write_text(json.dumps(dict(tally), sort_keys=True))


class PeerWeeks(RuleBasedStateMachine):
    """One archive kept by syncing two pinned peers whose logs share one origin (the
    second squats the first's) under two keys. The peers grow, roll back to a copy of an
    earlier week, and are synced in any order. A sync succeeds exactly when the peer's
    log extends what this archive last synced of that (origin, key); a rolled-back or
    forked peer is refused (exit 1) without blocking the other, and nothing archived is
    ever lost."""

    fixtures: dict = {}  # "tmp", "corpus" (the corpus folder), "raws" (its bundles), "signers"
    tally: Counter = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.home = Path(tempfile.mkdtemp(prefix="peers-", dir=self.fixtures["tmp"]))
        self.signers = self.fixtures["signers"]
        # a peer's log: its entries, each (the run that wrote it, the bundle it attests), as
        # the peer holds it now and as this archive last synced it; and each week's copy
        self.history: dict[str, tuple[tuple[int, int], ...]] = {name: () for name in self.signers}
        self.synced: dict[str, tuple[tuple[int, int], ...]] = {name: () for name in self.signers}
        self.copies: dict[str, list[tuple[tuple, Path]]] = {name: [] for name in self.signers}
        self.held: dict[str, bytes] = {}
        self.runs = 0

    def folder(self, name: str) -> Path:
        return self.home / name

    @initialize(owner=st.integers(0, 30), squatter=st.integers(0, 30))
    def peers_publish(self, owner: int, squatter: int) -> None:
        self._grow("owner", owner, 5)
        self._grow("squatter", squatter, 3)

    @rule(
        grows=st.dictionaries(st.sampled_from(["owner", "squatter"]), st.tuples(st.integers(0, 35), st.integers(1, 5))),
        rolls_back=st.dictionaries(st.sampled_from(["owner", "squatter"]), st.integers(1, 3), max_size=1),
        order=st.permutations(["owner", "squatter"]),
        both=st.booleans(),
    )
    def a_week(self, grows: dict, rolls_back: dict, order: list[str], both: bool) -> None:
        """Peers roll back to a copy of an earlier week or grow, then the archive syncs
        one of them, or both in ``order``."""
        for name, back in rolls_back.items():
            self._roll_back(name, back)
        for name, (start, count) in grows.items():
            self._grow(name, start, count)
        for name in order[: 2 if both else 1]:
            self._sync(name)

    def _grow(self, name: str, start: int, count: int) -> None:
        raws = self.fixtures["raws"][start : start + count]
        origin = log_origin(self.signers["owner"].key_id)  # the squatter names the owner's log
        write_run(LocalStore(self.folder(name)), self.signers[name], self.fixtures["keyring"], raws, log_origin=origin)
        self.runs += 1
        held = {raw for _, raw in self.history[name]}  # a bundle the peer holds gets no new entry
        self.history[name] += tuple((self.runs, i) for i in range(start, start + len(raws)) if i not in held)
        copy = self.home / f"{name}-{self.runs}"
        shutil.copytree(self.folder(name), copy)
        self.copies[name].append((self.history[name], copy))

    def _roll_back(self, name: str, back: int) -> None:
        """The peer is restored from a copy of an earlier week (never emptied)."""
        earlier = self.copies[name][: max(1, len(self.copies[name]) - back)]
        history, copy = earlier[-1]
        shutil.rmtree(self.folder(name))
        shutil.copytree(copy, self.folder(name))
        self.history[name] = history
        self.tally.update(rollbacks=history != self.copies[name][-1][0])

    def _sync(self, name: str) -> None:
        signer = self.signers[name]
        (self.home / "peer-key.json").write_text(json.dumps(signer.pinned().document()))
        result = sync(self.home, self.folder(name), self.fixtures["corpus"], signer)
        extends = self.history[name][: len(self.synced[name])] == self.synced[name]
        self.tally.update(syncs=1, refused=not extends)
        assert result.returncode == (0 if extends else 1), result.output[-2000:]
        if extends:
            self.synced[name] = self.history[name]
        else:
            assert "log_rolled_back" in result.output or "log_forked" in result.output, result.output[-2000:]
        held = raw_objects(self.home / "copy")
        assert self.held.items() <= held.items()  # nothing archived is lost, nor changed
        self.held = held

    def teardown(self) -> None:
        if (self.home / "copy").exists():
            audit(self.home, self.fixtures["corpus"]).check(0)


@pytest.mark.timeout(TIMEOUT)
def test_peers_that_grow_roll_back_and_squat_an_origin_never_cost_a_record(tmp_path, corpus_dir, corpus_keyring):
    name = os.environ.get("PITH_MODEL_PROFILE", "ci")
    signers = {
        "owner": Signer.from_seed("peer-key-owner", bytes(range(1, 33))),
        "squatter": Signer.from_seed("peer-key-squat", bytes(range(3, 35))),
    }
    raws = list(corpus_raws(corpus_dir).values())
    PeerWeeks.fixtures = {
        "tmp": tmp_path,
        "corpus": corpus_dir,
        "raws": raws,
        "signers": signers,
        "keyring": corpus_keyring,
    }
    PeerWeeks.tally = Counter()
    run_state_machine_as_test(
        PeerWeeks,
        settings=settings(
            {
                "ci": settings(max_examples=4, stateful_step_count=10),
                "long": settings(max_examples=20, stateful_step_count=20),
            }[name],
            deadline=None,
            derandomize=name == "ci",
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
        ),
    )
    assert PeerWeeks.tally["syncs"] >= 4  # the archive synced, not only the peers grew
    assert PeerWeeks.tally["refused"] >= 1  # and some peer rolled back or forked behind what it synced
    report(PeerWeeks.tally, "peers")
