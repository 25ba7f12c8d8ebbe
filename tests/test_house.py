"""The house rules a reader relies on (docs/ARCHITECTURE.md): no product module over 400
lines and no function over 60 (a module that grows is split by concept, a function by its
named steps), at most 15 modules directly inside a package (the rest in wings), and no
circle of imports, so that each module can be read knowing only what it imports."""

import ast
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

from tests.test_layers import imported_modules

ROOT = Path(__file__).resolve().parents[1]
MOST_LINES_PER_MODULE = 400
MOST_LINES_PER_FUNCTION = 60
MOST_MODULES_DIRECTLY_INSIDE = 15  # more, and a package goes in wings named for what they do
IN_WINGS = ("pith_archiver", "crawler", "storage", "pipelines")  # pith/, the protocol core, is one layer


def product_packages() -> list[str]:
    """The top-level packages the wheel holds, found as pyproject.toml tells setuptools."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(ROOT, include=found["include"], exclude=found.get("exclude", ()))
    return sorted({name.split(".")[0] for name in packages})


def modules_of(package: str) -> dict[str, Path]:
    """Every module of a top-level package, by its dotted name (a package by its own)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def long_functions(source: str, most: int = MOST_LINES_PER_FUNCTION) -> dict[str, int]:
    """The functions and methods of a module longer than ``most`` lines, with their lengths."""
    return {
        node.name: length
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > most
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative):
    each a set of modules that import one another, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        walk = [(root, iter(sorted(graph[root])))]
        while walk:
            node, targets = walk[-1]
            target = next(targets, None)
            if target is None:
                walk.pop()
                if walk:
                    low[walk[-1][0]] = min(low[walk[-1][0]], low[node])
                if low[node] == index[node]:
                    component = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(component) > 1:
                        found.append(sorted(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                walk.append((target, iter(sorted(graph[target]))))
            elif target in stack:
                low[node] = min(low[node], index[target])
    return found


@pytest.mark.parametrize("package", product_packages())
def test_no_product_module_is_over_400_lines(package):
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text("utf-8").splitlines())
        for path in (ROOT / package).rglob("*.py")
    }
    assert {name: lines for name, lines in lengths.items() if lines > MOST_LINES_PER_MODULE} == {}


@pytest.mark.parametrize("package", product_packages())
def test_no_product_function_is_over_60_lines(package):
    found = {
        f"{path.relative_to(ROOT)}:{name}": lines
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, lines in long_functions(path.read_text("utf-8")).items()
    }
    assert found == {}


@pytest.mark.parametrize("package", IN_WINGS)
def test_a_package_holds_at_most_15_modules_directly_the_rest_in_wings(package):
    direct = sorted(path.name for path in (ROOT / package).glob("*.py"))
    assert len(direct) <= MOST_MODULES_DIRECTLY_INSIDE, direct


@pytest.mark.parametrize("package", product_packages())
def test_no_circle_of_imports(package):
    """Lazy imports (inside a function) count: a circle is one however late it closes."""
    modules = modules_of(package)
    graph = {name: imported_modules(path) & set(modules) - {name} for name, path in modules.items()}
    assert circles(graph) == []


def test_the_checks_see_a_long_function_and_a_circle():
    body = "".join(f"        x{i} = {i}\n" for i in range(60))
    assert long_functions(f"def short():\n    pass\n\n\nclass A:\n    def long(self):\n{body}") == {"long": 61}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
