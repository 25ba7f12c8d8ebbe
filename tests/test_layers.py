"""Imports run one way (docs/ARCHITECTURE.md): the protocol core at the bottom, the
command line at the top, nothing below importing anything above it; the test kit on
top of them all, imported by no product package and left out of the wheel."""

import ast
import re
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]

MAY_IMPORT = {  # package: the project packages its modules may import, besides its own
    "pith": set(),
    "storage": {"pith"},
    "crawler": {"pith", "storage"},
    "pipelines": {"pith", "storage", "crawler"},
    "pith_archiver": {"pith", "storage", "crawler", "pipelines"},
    "pith_testkit": {"pith", "storage", "pith_archiver"},
}
WINGS_MAY_IMPORT = {  # storage's wings: the wings each may import, besides its own; its own modules import them all
    "storage.runtime": set(),
    "storage.archive": {"storage.runtime"},
    "storage.capture": {"storage.runtime", "storage.archive"},
    "storage.transparency": {"storage.runtime", "storage.archive"},
    "storage.publishing": {"storage.runtime", "storage.archive", "storage.capture", "storage.transparency"},
    "storage.writing": {"storage.runtime", "storage.archive", "storage.capture", "storage.transparency"},
    "storage.serving": {"storage.runtime", "storage.archive", "storage.publishing"},
    "storage.witness": {"storage.runtime", "storage.archive", "storage.transparency", "storage.serving"},
    "storage.syncing": {"storage.runtime", "storage.archive", "storage.capture", "storage.writing"},
}
MOST_MODULES_DIRECTLY_IN_STORAGE = 15
CRAWLER_WINGS_MAY_IMPORT = {  # the crawler's wings: the wings each may import, besides its own and crawler/*.py
    "crawler.scheduling": set(),
    "crawler.verifying": set(),
    "crawler.frontier": {"crawler.scheduling"},
    "crawler.extensions": {"crawler.scheduling", "crawler.verifying"},
    "crawler.downloading": {"crawler.extensions"},
    "crawler.spider_mixins": {"crawler.scheduling", "crawler.verifying", "crawler.downloading"},
    "crawler.spiders": {"crawler.scheduling", "crawler.verifying", "crawler.downloading", "crawler.spider_mixins"},
}
MOST_MODULES_DIRECTLY_IN_CRAWLER = 15
# never the Redis frontier: the frontier, when configured, connects to their signals
ONE_MACHINE_CRAWL = ("crawler.spiders", "crawler.spider_mixins", "crawler.scheduling", "crawler.extensions")
PRODUCT = sorted(set(MAY_IMPORT) - {"pith_testkit"})
MODULE_NAME = re.compile(r"^pith_testkit(\.\w+)*(:\w+)?$")  # "pith_testkit.cli:main", as a lazy import takes it
NO_FRAMEWORKS = {"scrapy", "twisted", "boto3", "botocore", "pyarrow", "click", "redis"}
THIRD_PARTY_BELOW_THE_CRAWLER = {"pith": NO_FRAMEWORKS, "storage.runtime": NO_FRAMEWORKS}


def imported_modules(path: Path, code: str | None = None) -> set[str]:
    """Every module a file imports, by its full name (``from a.b import c`` imports
    ``a.b.c`` when that is a module of ours, ``a.b`` otherwise); relative imports too."""
    package = ".".join(path.relative_to(ROOT).parent.parts) if path.is_relative_to(ROOT) else ""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8") if code is None else code)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if is_module(f"{module}.{alias.name}"))
    return found


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported_packages(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path) if name}


def wing_of(module: str, wings: dict[str, set[str]] = WINGS_MAY_IMPORT) -> str | None:
    return next((wing for wing in wings if module == wing or module.startswith(wing + ".")), None)


def crawler_modules_imported(path: Path, code: str | None = None) -> set[str]:
    return {name for name in imported_modules(path, code) if name == "crawler" or name.startswith("crawler.")}


def crawler_wings_imported(path: Path, code: str | None = None) -> set[str | None]:
    """The crawler's wings a file imports (None: crawler's own modules)."""
    return {wing_of(name, CRAWLER_WINGS_MAY_IMPORT) for name in crawler_modules_imported(path, code)}


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_a_package_imports_only_the_layers_below_it(package):
    wrong = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        imported = imported_packages(path)
        above = (imported & set(MAY_IMPORT)) - MAY_IMPORT[package] - {package}
        banned = imported & THIRD_PARTY_BELOW_THE_CRAWLER.get(package, set())
        if above or banned:
            wrong[str(path.relative_to(ROOT))] = sorted(above | banned)
    assert wrong == {}


@pytest.mark.parametrize("wing", sorted(WINGS_MAY_IMPORT))
def test_a_storage_wing_imports_only_the_wings_below_it(wing):
    """Inside storage: process plumbing (runtime, no frameworks) and the archive at rest
    at the bottom; capture and the transparency logs on it; publishing and writing a run
    on those; serving an archive beside publishing, the witness beside transparency;
    audit (storage's own modules) on top."""
    wrong = {}
    for path in sorted(ROOT.joinpath(*wing.split(".")).rglob("*.py")):
        imported = {name for name in imported_modules(path) if name == "storage" or name.startswith("storage.")}
        above = {name for name in imported if wing_of(name) not in WINGS_MAY_IMPORT[wing] | {wing}}
        banned = imported_packages(path) & THIRD_PARTY_BELOW_THE_CRAWLER.get(wing, set())
        if above or banned:
            wrong[str(path.relative_to(ROOT))] = sorted(above | banned)
    assert wrong == {}


def test_storage_holds_wings_and_few_modules_of_its_own():
    wings = {path.parent.name for path in (ROOT / "storage").glob("*/__init__.py")}
    assert {f"storage.{name}" for name in wings} == set(WINGS_MAY_IMPORT)
    assert len(list((ROOT / "storage").glob("*.py"))) <= MOST_MODULES_DIRECTLY_IN_STORAGE


@pytest.mark.parametrize("wing", sorted(CRAWLER_WINGS_MAY_IMPORT))
def test_a_crawler_wing_imports_only_the_wings_it_may(wing):
    """Inside the crawler: scheduling (the claims every scheduler makes) and verifying at
    the bottom; the shared frontier claiming as scheduling does; the extensions (the
    crawl's archive) on those; downloading, whose WARC recorder hands exchanges to the
    archive; the spider's mixins and the spider on top. crawler's own modules (its
    config, settings, signals, stat and meta keys, items, links, seeds) are every wing's."""
    allowed = CRAWLER_WINGS_MAY_IMPORT[wing] | {wing, None}
    wrong = {}
    for path in sorted(ROOT.joinpath(*wing.split(".")).rglob("*.py")):
        above = crawler_wings_imported(path) - allowed
        if above:
            wrong[str(path.relative_to(ROOT))] = sorted(map(str, above))
    assert wrong == {}


def test_the_crawlers_own_modules_import_no_wing():
    """What every wing shares imports none of them."""
    wrong = {
        str(path.relative_to(ROOT)): crawler_wings_imported(path) - {None} for path in (ROOT / "crawler").glob("*.py")
    }
    assert {path: wings for path, wings in wrong.items() if wings} == {}


def test_the_crawler_holds_wings_and_few_modules_of_its_own():
    wings = {path.parent.name for path in (ROOT / "crawler").glob("*/__init__.py")}
    assert {f"crawler.{name}" for name in wings} == set(CRAWLER_WINGS_MAY_IMPORT)
    assert len(list((ROOT / "crawler").glob("*.py"))) <= MOST_MODULES_DIRECTLY_IN_CRAWLER


@pytest.mark.parametrize("wing", ONE_MACHINE_CRAWL)
def test_the_one_machine_crawl_imports_nothing_of_the_redis_frontier(wing):
    """The spider, its mixins, the local scheduler and its seen-set claim with the
    vocabulary of ``crawler.scheduling.claims``, which the frontier speaks too; the
    extensions (the crawl's archive) leave the frontier to check its own signing key."""
    wrong = [
        str(path.relative_to(ROOT))
        for path in sorted(ROOT.joinpath(*wing.split(".")).rglob("*.py"))
        if "crawler.frontier" in crawler_wings_imported(path)
    ]
    assert wrong == []


@pytest.mark.parametrize("package", PRODUCT)
def test_no_product_module_names_the_test_kit_to_import_it_later(package):
    named = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.match(node.value)
    ]
    assert named == []


def test_the_wheel_holds_the_product_and_not_the_test_kit():
    """The packages setuptools puts in the wheel, found as pyproject.toml tells it to."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"]["find"]
    packages = set(find_packages(ROOT, include=found["include"], exclude=found.get("exclude", ())))
    assert set(PRODUCT) <= packages
    assert not {name for name in packages if name.split(".")[0] not in PRODUCT}


def test_the_walker_sees_an_upward_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pith_archiver import FIXTURES\n    import scrapy.http\n")
    assert imported_packages(module) == {"pith_archiver", "scrapy"}


def test_the_walker_sees_a_wing_imported_as_a_module_and_relatively():
    module = ROOT / "storage" / "archive" / "stores.py"
    code = "from storage.capture import warc\nfrom ..writing.writer import ArchiveWriter\nfrom . import layout\n"
    found = {name for name in imported_modules(module, code) if name.startswith("storage")}
    assert {wing_of(name) for name in found} == {"storage.capture", "storage.writing", "storage.archive"}


def test_the_walker_sees_the_crawlers_wings_and_its_own_modules():
    module = ROOT / "crawler" / "spiders" / "pith.py"
    code = "from ..frontier import Frontier\nfrom ..scheduling.claims import BUNDLE\nfrom .. import signals\n"
    assert crawler_wings_imported(module, code) == {"crawler.frontier", "crawler.scheduling", None}


def test_no_class_name_is_defined_in_two_product_modules():
    """One name per concept (docs/ARCHITECTURE.md, Glossary): a class name means one thing."""
    where: dict[str, list[str]] = {}
    for package in MAY_IMPORT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.ClassDef):
                    where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


# Public top-level function names that must repeat, each with why: none today.
SHARED_FUNCTION_NAMES: dict[str, str] = {}


def public_functions(source: str) -> set[str]:
    """The public functions a module defines at its top level (methods are not)."""
    return {
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_")
    }


def test_no_public_function_name_is_defined_in_two_product_modules():
    """A top-level function name means one thing: ``check_bundle`` returning facts in
    one module and raising in another, or two ``exchange_of`` converting in opposite
    directions, make a reader guess which one an import names."""
    where: dict[str, list[str]] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for name in public_functions(path.read_text("utf-8")):
                where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert {name: paths for name, paths in twice.items() if name not in SHARED_FUNCTION_NAMES} == {}


def test_the_function_walker_sees_top_level_functions_only():
    source = "def serve(): ...\nasync def fetch(): ...\ndef _private(): ...\nclass A:\n    def serve(self): ...\n"
    assert public_functions(source) == {"serve", "fetch"}
