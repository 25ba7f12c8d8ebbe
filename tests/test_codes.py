"""The one catalogue of codes (``pith.reasons``) and the docs' tables agree, both ways:
every code is a row of a table, and every code a table lists is in the catalogue."""

import re
from pathlib import Path

from pith.reasons import Finding, Reason

DOCS = Path(__file__).resolve().parent.parent / "docs"
CODE = re.compile(r"[a-z]+(?:_[a-z0-9]+)*")  # how a code is spelled: lower snake_case


def table_codes(doc: str, section: str = "") -> set[str]:
    """The codes the first column of each `| code |` (or `| line |`) table of ``doc``
    names (the first word of each backticked term), within ``section`` if given. A
    `| line |` table (what ``cosign`` prints) also has lines that are not problems
    (``cosigned ...``): there only two-word codes count."""
    text = (DOCS / doc).read_text("utf-8")
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    codes: set[str] = set()
    in_table, only_compound = False, False
    for line in text.splitlines():
        if header := re.match(r"\| *(code|line) *\|", line):
            in_table, only_compound = True, header.group(1) == "line"
        elif not line.startswith("|"):
            in_table = False
        elif in_table and not line.startswith("| ---") and not line.startswith("|---"):
            first_cell = line.split("|")[1]
            terms = [term.split()[0] for term in re.findall(r"`([^`]+)`", first_cell)]
            codes.update(term for term in terms if CODE.fullmatch(term) and ("_" in term or not only_compound))
    return codes


def test_the_rejection_reasons_are_the_reason_tables():
    assert table_codes("VERIFICATION.md", "Reason codes") == {code.value for code in Reason}


def test_the_findings_are_the_audit_and_cosign_tables():
    documented = table_codes("ARCHIVE.md") | table_codes("TRANSPARENCY.md")
    assert documented == {code.value for code in Finding}


def test_one_code_one_spelling():
    """A finding that is also a rejection carries the rejection's name and spelling,
    and no spelling stands for two names."""
    reasons = {code.name: code.value for code in Reason}
    shared = {code.name for code in Finding} & set(reasons)
    assert shared == {"CHAIN_BROKEN", "CHECKPOINT_INVALID"}
    assert all(Finding[name].value == reasons[name] for name in shared)
    spelled = {code.value: code.name for code in Reason}
    assert [code for code in Finding if spelled.get(code.value, code.name) != code.name] == []


def test_the_table_reader_sees_a_made_up_code(tmp_path, monkeypatch):
    """The docs check can fail: a row the catalogue lacks is read as a code."""
    (tmp_path / "X.md").write_text(
        "| code | meaning |\n| --- | --- |\n| `made_up path` | no |\n| `orphan X` | x |\n\n"
        "| line | meaning |\n| --- | --- |\n| `cosigned X` | x |\n| `witness_lied X` | x |\n"
    )
    monkeypatch.setattr(f"{__name__}.DOCS", tmp_path)
    assert table_codes("X.md") == {"made_up", "orphan", "witness_lied"}
