"""The one road into the crawl: the crawl command's options, grouped and handed over
as one object, and the config built from them or from Scrapy's settings."""

import re
from dataclasses import fields
from datetime import timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from scrapy.settings import Settings

from crawler.crawl_config import ARGUMENTS, DEFAULT_RESOLVER, CrawlConfig, tuned_by
from crawler.seeds import SeedError
from pith.keyring import REGISTRY_KEY
from pith_archiver.commands.crawl import crawl
from pith_archiver.crawl.options import CRAWL_OPTIONS, OPTION, SECTIONS, CrawlOptions
from pith_archiver.crawl.run import project_settings, settings_of
from storage.archive.signing_key import default_key_path


def test_every_crawl_option_is_in_a_help_section_and_a_field_of_the_options_object():
    names = {param.name for param in crawl.params} - {"help"}
    sectioned = [name for _, section in SECTIONS for name in section]
    assert len(sectioned) == len(set(sectioned))  # each option in one section
    assert names - {"seeds", "from_archive"} == set(sectioned)  # --from-archive: hidden, renamed `sync`
    # what click hands over becomes CrawlOptions whole (the hook and verbosity options become one field each)
    handed = names - {"quiet", "verbose", "metrics_file", "pushgateway", "notify_urls"} | {"verbosity", "hooks"}
    assert handed == {field.name for field in fields(CrawlOptions)}


def options_given(*args: str) -> CrawlOptions:
    """``crawl ARGS`` as click parses them, before the command runs."""
    params = crawl.make_context("crawl", list(args)).params
    hooks_and_verbosity = {"quiet", "verbose", "metrics_file", "pushgateway", "notify_urls"}
    return CrawlOptions(**{k: v for k, v in params.items() if k not in hooks_and_verbosity}, verbosity=1, hooks=None)


@pytest.mark.parametrize(
    "args, field, value",
    [
        (["--commit-every", "0"], "commit_every", 0),
        (["--recheck-after", "2.5"], "recheck_after", timedelta(days=2.5)),
        (["--cross-check", "3"], "cross_check", 3),
        (["--no-warc"], "warc", None),
        (["--worker", "w9"], "worker", "w9"),
        (["--log-origin", "archive.example.org/pith"], "log_origin", "archive.example.org/pith"),
    ],
)
def test_an_option_with_a_setting_reaches_the_config_through_its_row_alone(args, field, value):
    """The table's row is all an option needs to reach the crawl: its setting, which the
    config reads as ``scrapy crawl -s`` gives it (no line of code copies the option)."""
    settings = project_settings(settings_of(options_given(*args)))
    assert tuned_by(settings)[field] == value
    (row,) = [row for row in CRAWL_OPTIONS if row.name == field.replace("warc", "no_warc")]
    assert row.setting in settings_of(options_given(*args))


def test_the_walk_of_one_option_in_architecture_is_one_row_and_where_it_takes_effect():
    """docs/ARCHITECTURE.md's walk names the row it shows, and that row is the table's."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    walk = text[text.index("## Adding a crawl option") :].split("\n## ", 1)[0]
    assert "one row" in walk and "where it takes effect" in walk.lower()
    named, setting = re.search(r'CrawlOption\(\s*"(\w+)",\s*\w+,\s*"--[\w-]+".*?setting="(\w+)"', walk, re.S).groups()
    assert OPTION[named].setting == setting


def test_the_help_lists_the_options_under_their_sections():
    text = CliRunner().invoke(crawl, ["--help"], terminal_width=120).output
    at = [text.index(f"{title}:\n") for title, _ in SECTIONS]
    assert at == sorted(at)  # in the order of SECTIONS
    how_far = text[text.index("How far:\n") : text.index("Trust:\n")]
    assert "--max-depth" in how_far and "--out" not in how_far


def test_scrapy_crawl_arguments_and_settings_build_the_same_config_fields():
    settings = project_settings(
        {"PITH_ARCHIVE": None, "PITH_COMMIT_EVERY": "7", "PITH_WARC_QUEUE_BYTES": "1024", "PITH_WORKER": "w1"}
    )
    arguments = {
        "seeds": "RLLQL6357CWNZYHNBMCYD3UK5B, 1904.12043",
        "resolver": "http://127.0.0.1:8/",
        "mirrors": "http://127.0.0.1:9/m/,http://127.0.0.1:10",
        "max_depth": "2",
        "follow": "false",
        "mirrors_from_registry": "yes",
    }
    assert set(arguments) <= ARGUMENTS
    config = CrawlConfig.from_settings(settings, arguments)
    assert (config.resolver, config.mirrors) == ("http://127.0.0.1:8", ("http://127.0.0.1:9/m", "http://127.0.0.1:10"))
    assert (config.max_depth, config.max_records, config.follow, config.mirrors_from_registry) == (2, 0, False, True)
    assert config.seeds.count == 2 and config.store is None and config.signer is None
    assert (config.commit_every, config.worker) == (7, "w1")
    assert config.warc is None  # no archive, no WARC files
    assert config.describe()["resolver"] == "http://127.0.0.1:8"
    with pytest.raises(SeedError):
        CrawlConfig.from_settings(settings, {"seeds": "not-a-seed!"})


def test_the_warc_policy_comes_from_the_settings_and_is_off_with_pith_warc_false():
    tuned = tuned_by(Settings({"PITH_ARCHIVE": "a", "PITH_WARC": True, "PITH_WARC_STALL_TIMEOUT": "2.5"}))
    assert tuned["warc"] is not None and tuned["warc"].stall_timeout == 2.5
    assert tuned_by(Settings({"PITH_ARCHIVE": "a", "PITH_WARC": "False"}))["warc"] is None


def test_the_help_shows_the_defaults_the_crawl_uses_and_the_config_has_them_too():
    """One default per setting: where it is defined, the help reads it, and a config
    built without settings holds what the project's settings give."""
    context = click.Context(crawl)
    helps = {param.name: record[1] for param in crawl.params if (record := param.get_help_record(context))}
    settings = project_settings({})
    assert f"[default: {settings.getint('PITH_COMMIT_EVERY')}]" in helps["commit_every"]
    assert f"[default: {settings['PITH_ARCHIVE']}]" in helps["archive"]
    assert f"[default: {settings['PITH_PROGRESS']}]" in helps["progress"]
    assert f"[default: {DEFAULT_RESOLVER}]" in helps["resolver"]
    key = default_key_path()  # under XDG_CONFIG_HOME, as it was when the help was made
    assert f"{Path(key.parent.name) / key.name}, created on first use]" in helps["signing_key"]
    assert f"({REGISTRY_KEY['key_id']})" in helps["no_default_keys"]
    tuned = {name: value for name, value in tuned_by(settings).items() if name != "warc"}  # off without a store
    defaults = {field.name: field.default for field in fields(CrawlConfig)}
    assert tuned == {name: defaults[name] for name in tuned}
    assert defaults["commit_every"] == settings.getint("PITH_COMMIT_EVERY") > 0
