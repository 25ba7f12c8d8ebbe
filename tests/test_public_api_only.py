"""The tests read only what the project offers: no test or shared helper reaches into
another object's private attributes (``obj._name``), so a refactor that keeps the
public behaviour keeps the tests green, and a test that passes proves that behaviour."""

import ast
from pathlib import Path

TESTS = Path(__file__).parent
OWN = {"self", "cls"}  # a helper class's own state
ALLOWED = {  # (object, attribute) of libraries whose documented API has underscores
    ("sys", "_getframe"),
    ("os", "_exit"),
}


def private_reads(source: str, filename: str = "<source>") -> list[str]:
    """``line: obj._name`` for each single-underscore attribute of something not ``self``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        if owner in OWN or (owner, node.attr) in ALLOWED:
            continue
        found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_private_reads_and_passes_public_ones():
    source = "store._unsynced\nbudget.writers\nself._lock\ncls._cache\nsys._getframe()\nx.__class__\nf()._hidden\n"
    assert private_reads(source) == ["1: store._unsynced", "7: f()._hidden"]


def test_no_test_reads_a_private_attribute():
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if "fuzz_corpus" not in path.parts and (found := private_reads(path.read_text("utf-8"), str(path)))
    }
    assert offenders == {}, "use the public API or what the behaviour shows: " + repr(offenders)
