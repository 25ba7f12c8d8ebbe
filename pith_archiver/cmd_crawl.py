"""``pith-archiver crawl``: the main job."""

import sys

import click

from crawler.frontier import FrontierError, SigningKeyInUse, check_url, connect
from crawler.jobdir import JobdirInUse
from crawler.seeds import SeedError, parse_seed, read_seeds_file
from .crawling import default_state_dir, run_crawl


def _setting_pairs(values):
    pairs = {}
    for value in values:
        name, sep, setting = value.partition("=")
        if not sep:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint="-s")
        pairs[name] = setting
    return pairs


def _share(text: str) -> float:
    """``N%`` (or a bare N) as a share between 0 and 1."""
    try:
        percent = float(text.strip().removesuffix("%"))
    except ValueError:
        percent = -1.0
    if not 0 <= percent <= 100:
        raise click.BadParameter(f"{text!r} is not a percentage from 0% to 100%", param_hint="--check-state-sample")
    return percent / 100


@click.command()
@click.argument("seeds", nargs=-1)
@click.option("--seeds-file", type=click.Path(exists=True, dir_okay=False),
              help="One seed per line; '#' starts a comment.")
@click.option("--resolver", default=None, help="Resolver base URL [default: https://pith.science].")
@click.option("--out", "archive", default="archive", show_default=True,
              help="Archive: a local folder or s3://bucket/prefix.")
@click.option("--s3-endpoint-url", default=None, help="S3-compatible endpoint (MinIO, Ceph, R2...).")
@click.option("--keyring", "keyrings", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Pin the keys in this JSON file; repeatable.")
@click.option("--archive-keyring", "archive_keyrings", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Also count what the archiver keys in this file committed as archived (the other workers "
                   "of a shared crawl, an earlier key); repeatable.")
@click.option("--no-default-keys", is_flag=True, help="Do not trust the built-in registry key.")
@click.option("--max-records", type=click.IntRange(0), default=0, help="Stop after this many records (0: no bound).")
@click.option("--max-depth", type=click.IntRange(-1), default=-1, help="Link hops from the seeds (-1: no bound).")
@click.option("--no-follow", is_flag=True, help="Fetch the seeds only.")
@click.option("--check-state", is_flag=True,
              help="Also fetch every record's state.json and compare it with the state signed in its bundle.")
@click.option("--check-state-sample", metavar="N%", default=None,
              help="As --check-state, for N% of the records only (the same ones on every run).")
@click.option("--jobdir", type=click.Path(file_okay=False), help="Keep crawl state here to resume after Ctrl-C.")
@click.option("--frontier", metavar="URL", help="Share the crawl with other workers through this Redis "
              "(redis://host:port/db); resumable there, so not with --jobdir.")
@click.option("--worker", metavar="NAME", help="This worker's name in run ids and the frontier [default: host.pid].")
@click.option("--mirror", "mirrors", multiple=True, help="A fallback resolver base URL; repeatable.")
@click.option("--allow-host", "allow_hosts", multiple=True, help="Another host the crawl may fetch from.")
@click.option("--progress", type=click.Choice(["auto", "log", "off"]), default="auto", show_default=True)
@click.option("--signing-key", type=click.Path(dir_okay=False),
              help="The archiver's signing key file [default: created on first use in ~/.config/pith-archiver].")
@click.option("--commit-every", type=click.IntRange(0), default=None,
              help="Commit a manifest every N bundles as the crawl goes (0: only at the end) [default: 10000].")
@click.option("--stats-json", type=click.Path(dir_okay=False), help="Write the final crawl stats here.")
@click.option("-s", "--set", "settings", multiple=True, help="A Scrapy setting NAME=VALUE; repeatable.")
def crawl(seeds, seeds_file, resolver, archive, s3_endpoint_url, keyrings, archive_keyrings, no_default_keys,
          max_records, max_depth, no_follow, check_state, check_state_sample, jobdir, frontier, worker, mirrors,
          allow_hosts, progress, signing_key, commit_every, stats_json, settings):
    """Crawl a resolver from SEEDS, verify every bundle, archive it into --out.

    A seed is a Pith number (full or short), a 26-character suffix, an arXiv id, a
    DOI, a record page or bundle URL, or 'sitemap'. With no SEEDS, no --seeds-file
    and no --resolver, runs the embedded demo: the bundled corpus served on loopback,
    crawled from one seed into --out.
    """
    if not seeds and not seeds_file and resolver is None:
        from .demo import run_demo
        sys.exit(run_demo(archive, progress))
    try:
        for text in [*seeds, *(read_seeds_file(seeds_file) if seeds_file else [])]:
            parse_seed(text)
    except SeedError as exc:
        raise click.BadParameter(str(exc), param_hint="SEEDS") from None
    overrides = {"PITH_ARCHIVE": archive, "PITH_S3_ENDPOINT_URL": s3_endpoint_url,
                 "PITH_KEYRINGS": list(keyrings), "PITH_ARCHIVE_KEYRINGS": list(archive_keyrings),
                 "PITH_DEFAULT_KEYS": not no_default_keys,
                 "PITH_PROGRESS": progress, "PITH_SIGNING_KEY": signing_key, "PITH_STATE_DIR": default_state_dir(archive, jobdir)}
    if check_state or check_state_sample is not None:
        overrides["PITH_CHECK_STATE"] = 1.0 if check_state else _share(check_state_sample)
    if jobdir:
        overrides["JOBDIR"] = jobdir
    if frontier:
        if jobdir:
            raise click.BadParameter("the frontier keeps the crawl's state; --jobdir would keep a second one",
                                     param_hint="--jobdir")
        try:
            check_url(frontier)
        except FrontierError as exc:
            raise click.BadParameter(str(exc), param_hint="--frontier") from None
        try:
            connect(frontier).close()
        except FrontierError as exc:
            raise click.ClickException(str(exc)) from None
        overrides["PITH_FRONTIER"] = frontier
    if worker:
        overrides["PITH_WORKER"] = worker
    if stats_json:
        overrides["PITH_STATS_FILE"] = stats_json
    if commit_every is not None:
        overrides["PITH_COMMIT_EVERY"] = commit_every
    overrides.update(_setting_pairs(settings))
    spider_args = {"seeds": list(seeds), "seeds_file": seeds_file, "resolver": resolver,
                   "max_records": max_records, "max_depth": max_depth, "follow": not no_follow,
                   "mirrors": list(mirrors), "allow_hosts": list(allow_hosts)}
    try:
        stats = run_crawl(spider_args, overrides)
    except (JobdirInUse, SigningKeyInUse) as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(report(stats, archive))


def report(stats: dict, archive: str) -> int:
    """Print the closing summary; exit status 0 when the run committed its manifest."""
    get = lambda key: stats.get(f"pith/{key}", 0)  # noqa: E731
    click.echo(f"\nrecords found {get('records_found')}, bundles fetched {get('bundles_fetched')}, "
               f"verified {get('verified')}, rejected {get('rejected')}, unchanged {get('not_modified')}, "
               f"archived {get('archived')} new, state mismatches {get('state_mismatch')}, "
               f"requests per record {get('requests_per_record')}")
    rejected = {k.split("/", 2)[2]: v for k, v in stats.items() if k.startswith("pith/rejected/")}
    if rejected:
        click.echo("rejections: " + ", ".join(f"{reason} {count}" for reason, count in sorted(rejected.items())))
    manifest, error, checkpoints = stats.get("pith/manifest"), stats.get("pith/commit_error"), get("checkpoints")
    if manifest and not error:
        click.echo(f"committed {archive}/{manifest}" + (f" (and {checkpoints} checkpoints before)" if checkpoints else ""))
        return 0
    kept = f"; {checkpoints} checkpoints committed before, the last {archive}/{manifest}" if checkpoints else ""
    click.echo(f"nothing more committed to {archive}: {error or 'the run did not finish'}{kept}" if checkpoints else
               f"nothing committed to {archive}: {error or 'the run did not finish'}", err=True)
    return 1
