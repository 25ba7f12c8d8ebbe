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
    "mirror": {"pith", "storage"},
    "witness": {"pith", "mirror"},
    "pith_archiver": {"pith", "storage", "crawler", "pipelines", "mirror", "witness"},
    "pith_testkit": {"pith", "storage", "mirror", "pith_archiver"},
}
PRODUCT = sorted(set(MAY_IMPORT) - {"pith_testkit"})
MODULE_NAME = re.compile(r"^pith_testkit(\.\w+)*(:\w+)?$")  # "pith_testkit.cli:main", as a lazy import takes it
THIRD_PARTY_BELOW_THE_CRAWLER = {"pith": {"scrapy", "twisted", "boto3", "botocore", "pyarrow", "click", "redis"}}


def imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


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
