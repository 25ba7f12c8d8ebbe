"""The crawler against plain static files: it must not depend on anything only our
mirror does (no manifest, no alias redirects, no sitemap)."""

import json
import os
import subprocess
import sys

import pytest

from tests.plugins.crawling import run_cli_crawl


@pytest.mark.slow
def test_one_seed_reaches_every_record_through_page_links(tmp_path, static_site):
    base, suffixes, _ = static_site
    result = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=tmp_path / "archive")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("records_found") == len(suffixes) == 3
    assert result.stat("verified") == 3
    assert result.stat("rejected") == 0
    # real bundles do not name who cites them: each record's page is read, its state is not
    assert result.stat("pages_fetched") == 3
    # robots, the signing key, the manifest, bundles, pages, one hop
    assert result.stats.get("downloader/request_count") == 1 + 1 + 1 + 3 + 3 + 1
    # a static server redirects /pith/<ID> to /pith/<ID>/: learnt once, then built final
    assert result.stat("redirects_learnt") == 1
    assert result.stats.get("downloader/response_status_count/301") == 1
    assert result.stat("requests_per_record") == 3.333
    # no port of ours listens: neither Scrapy's telnet console nor its remote control
    assert "Enabled extensions" in result.stderr
    assert "listening" not in result.stderr.lower(), result.stderr[-3000:]


@pytest.mark.slow
def test_state_json_is_not_fetched_unless_asked(tmp_path, static_site):
    base, suffixes, root = static_site
    (root / "pith" / suffixes[0] / "state.json").write_text('{"state_type":"pith_open_graph_state"}')
    result = run_cli_crawl(tmp_path, "--no-follow", suffixes[0], resolver=base, out=tmp_path / "archive")
    assert result.stat("verified") == 1
    assert result.stat("state_mismatch") == 0
    assert result.stats.get("downloader/request_count") == 4  # robots, the signing key, manifest, the bundle


@pytest.mark.slow
def test_every_local_seed_form_names_the_same_record(tmp_path, static_site):
    base, suffixes, _ = static_site
    suffix = "RLLQL6357CWNZYHNBMCYD3UK5B"
    forms = [
        suffix,
        f"pith:2019:{suffix}",
        f"{base}/pith/{suffix}",
        f"{base}/pith/{suffix}/bundle.json",
        f"https://pith.science/pith/{suffix}/bundle.json",
    ]
    result = run_cli_crawl(tmp_path, "--no-follow", *forms, resolver=base, out=tmp_path / "archive")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("records_found") == 1
    assert result.stat("verified") == 1


@pytest.mark.slow
def test_a_crawl_loads_neither_a_redis_client_without_a_frontier_nor_the_components_it_switches_off(
    tmp_path, static_site
):
    base, suffixes, _ = static_site
    # --no-warc: the WARC child, on by default, imports tldextract for its CDXJ index, in
    # its own process by design, and its import log would go to the same stderr
    result = run_cli_crawl(
        tmp_path,
        "--no-warc",
        suffixes[0],
        resolver=base,
        out=tmp_path / "archive",
        env={"PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time")}
    assert {"scrapy", "pyarrow"} <= imported  # the import log is complete
    assert not imported & {"redis", "scrapy_redis"}
    # what Scrapy's remote control and cookie middleware import: the log leaves out the
    # components themselves (loaded by importlib.import_module), not what they import
    assert not imported & {"aiohttp", "tldextract"}


@pytest.mark.slow
def test_pyarrow_encodes_with_the_system_allocator_unless_the_operator_says_otherwise(tmp_path, static_site):
    base, suffixes, _ = static_site
    ours = run_cli_crawl(tmp_path, "--no-follow", suffixes[0], resolver=base, out=tmp_path / "archive")
    theirs = run_cli_crawl(
        tmp_path, suffixes[0], resolver=base, out=tmp_path / "b", env={"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
    )
    assert (ours.returncode, theirs.returncode) == (0, 0), ours.stderr[-2000:] + theirs.stderr[-2000:]
    assert (ours.stats["pith/arrow_memory_pool"], theirs.stats["pith/arrow_memory_pool"]) == ("system", "jemalloc")


def test_the_malloc_arenas_are_capped_unless_the_operator_set_them():
    code = "from pith_archiver.crawl.tuning import economise; print(economise())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    capped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    left = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "MALLOC_ARENA_MAX": "8"}, timeout=60
    )
    assert (capped.stdout, left.stdout) == ("True\n", "False\n"), capped.stderr + left.stderr


@pytest.mark.slow
def test_bounds_on_the_walk(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    assert run_cli_crawl(tmp_path, "--no-follow", suffixes[0], resolver=base, out=archive).stat("records_found") == 1
    assert (
        run_cli_crawl(tmp_path, "--max-records", "2", suffixes[0], resolver=base, out=archive).stat("records_found")
        == 2
    )
    assert (
        run_cli_crawl(tmp_path, "--max-depth", "1", suffixes[0], resolver=base, out=archive).stat("records_found") == 2
    )
    assert (
        run_cli_crawl(tmp_path, "--max-depth", "1", suffixes[0], resolver=base, out=tmp_path / "archive").stat(
            "records_found"
        )
        == 2
    )


@pytest.mark.slow
def test_records_found_while_the_engine_is_busy_wait_on_disk_and_are_all_crawled(tmp_path, static_site):
    base, suffixes, _ = static_site
    result = run_cli_crawl(
        tmp_path, "-s", "CONCURRENT_REQUESTS=1", suffixes[0], resolver=base, out=tmp_path / "archive"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stat("records_found"), result.stat("verified")) == (3, 3)
    assert result.stat("requests_held_max") >= 1


@pytest.mark.slow
def test_seeds_file_with_comments(tmp_path, static_site):
    base, suffixes, _ = static_site
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# two of the three\n{suffixes[0]}\n\n  {suffixes[1]}  # trailing comment\n")
    result = run_cli_crawl(
        tmp_path, "--no-follow", "--seeds-file", str(seeds), suffixes[2], resolver=base, out=tmp_path / "archive"
    )
    assert result.stat("records_found") == 3
    assert result.stat("verified") == 3
    # the manifest names the file and how many seeds it gave, not each of its lines
    manifest = json.loads(next((tmp_path / "archive" / "manifests").glob("*.json")).read_text())
    recorded = manifest["crawl"]["spider_args"]
    assert recorded["seeds"] == [f"suffix:{suffixes[2]}"]
    assert recorded["seeds_file"] == {"path": str(seeds), "seeds": 2}


@pytest.mark.slow
def test_robots_txt_is_obeyed(tmp_path, static_site):
    base, suffixes, root = static_site
    (root / "robots.txt").write_text(f"User-agent: *\nDisallow: /pith/{suffixes[2]}\n")
    result = run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=tmp_path / "archive")
    assert result.stat("records_found") == 3
    assert result.stat("verified") == 2  # the disallowed record is found but never fetched
    assert result.stat("robots_forbidden") == 1
    assert result.stats.get("robotstxt/forbidden", 0) == 1  # its bundle; its page is under the same rule


@pytest.mark.slow
def test_state_json_that_differs_from_the_bundle_is_recorded(tmp_path, static_site):
    base, suffixes, root = static_site
    (root / "pith" / suffixes[0] / "state.json").write_text('{"state_type":"pith_open_graph_state"}')
    result = run_cli_crawl(
        tmp_path, "--no-follow", "--check-state", suffixes[0], resolver=base, out=tmp_path / "archive"
    )
    assert result.stat("verified") == 1
    assert result.stat("state_mismatch") == 1
    sampled = run_cli_crawl(
        tmp_path,
        "--resolver",
        base,
        "--out",
        str(tmp_path / "other"),
        "--no-follow",
        "--check-state-sample",
        "0%",
        suffixes[0],
    )
    assert sampled.stat("verified") == 1
    assert sampled.stats.get("downloader/request_count") == 4  # robots, the signing key, manifest, the bundle


@pytest.mark.slow
def test_a_bad_seed_is_a_usage_error_not_a_crash(tmp_path, static_site):
    base, _, _ = static_site
    result = run_cli_crawl(tmp_path, "not a seed at all", resolver=base, out=tmp_path / "archive")
    assert result.returncode != 0
    assert "not a Pith number" in result.stderr


@pytest.mark.slow
def test_scrapy_crawl_from_a_checkout_runs_the_same_job(tmp_path, static_site):
    """``scrapy crawl pith`` with the project's scrapy.cfg: same spider, same pipelines."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    base, suffixes, _ = static_site
    checkout = Path(__file__).resolve().parents[1]
    stats = tmp_path / "stats.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            "pith",
            "-a",
            f"seeds={suffixes[0]}",
            "-a",
            f"resolver={base}",
            "-s",
            f"PITH_ARCHIVE={tmp_path / 'archive'}",
            "-s",
            f"PITH_STATS_FILE={stats}",
            "-s",
            "PITH_PROGRESS=off",
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = json.loads(stats.read_text())
    assert values["pith/verified"] == values["pith/archived"] == 3
    assert (tmp_path / "archive" / values["pith/manifest"]).is_file()
