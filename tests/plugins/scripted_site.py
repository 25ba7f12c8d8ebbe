"""A scripted registry (pith_testkit.scripted) behind nginx, and the one archive its
scheduled runs fill, each run with the machine's clock set by libfaketime: what the
re-run tests drive and check."""

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from crawler.scheduling.held_records import bucket_of, sample_size
from pith_testkit.corpus import REGISTRY_EPOCH
from pith_testkit.scripted import ScriptedRegistry
from tests.plugins.crawling import CrawlResult, run_cli_crawl
from tests.plugins.tables import read_rows

START = REGISTRY_EPOCH + timedelta(days=12)  # after every record's first build
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def clock_at(when: datetime) -> dict:
    """The environment that runs a command with the machine's clock at ``when``."""
    if not Path(FAKETIME).exists():
        pytest.fail("libfaketime is missing: .ci/run installs Debian's faketime")
    return {"LD_PRELOAD": FAKETIME, "FAKETIME": "@" + when.strftime("%Y-%m-%d %H:%M:%S")}


class Site:
    """A scripted registry behind nginx, and the one archive its runs fill."""

    def __init__(self, tmp_path: Path, nginx, records: int, pages: int = 4):
        """A registry in ``tmp_path``, served by a new nginx (the ``nginx`` fixture)."""
        self.tmp_path, self.log = tmp_path, tmp_path / "access.log"
        self.base = nginx(tmp_path / "registry" / "site", access_log=self.log)
        self.registry = ScriptedRegistry(tmp_path / "registry" / "site", self.base, records, pages=pages)
        self.archive = tmp_path / "archive"

    def crawl(self, when: datetime, *args: str, status: int = 0) -> tuple[CrawlResult, list[str]]:
        self.log.write_text("")
        result = run_cli_crawl(
            self.tmp_path,
            *args,
            "sitemap",
            resolver=self.base,
            out=self.archive,
            corpus=self.registry.root.parent,
            env=clock_at(when),
        )
        assert result.returncode == status, result.stdout + result.stderr[-3000:]
        return result, self.log.read_text().splitlines()

    def current(self) -> dict[str, str]:
        """Each record's current version in the archive: suffix -> raw sha-256."""
        best: dict[str, tuple] = {}
        for row in read_rows(self.archive, "records"):
            suffix = row["pith_number"].rpartition(":")[2]
            order = (str(row["built_at"]), str(row["fetched_at"]))
            if str(row["accepted_as_current"]) != "False" and (suffix not in best or order > best[suffix][0]):
                best[suffix] = (order, row["raw_sha256"])
        return {suffix: sha for suffix, (_, sha) in best.items()}

    def pending(self) -> set[str]:
        """Records whose served version the archive does not hold as current."""
        held = self.current()
        return {s for s, body in self.registry.served().items() if held.get(s) != hashlib.sha256(body).hexdigest()}

    def state(self, name: str) -> dict:
        (path,) = self.tmp_path.rglob(name)
        return json.loads(path.read_text())

    def sampled(self, suffixes: list[str]) -> set[str]:
        """Of ``suffixes``, those in the next run's part of the rotating sample: the next
        ``sample_size`` records in the order of their bucket."""
        held = sorted(self.registry.suffixes, key=lambda s: bucket_of(s))
        start = self.state("freshness.json")["sample_from"]
        after = [s for s in held if bucket_of(s) > start] + [s for s in held if bucket_of(s) <= start]
        return set(after[: sample_size(len(held))]) & set(suffixes)
