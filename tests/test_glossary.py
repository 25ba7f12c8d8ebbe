"""The glossary's words used as defined (docs/ARCHITECTURE.md, Glossary), checked
over the product's code and the docs: a word that means two things in two places
makes a newcomer guess."""

import ast
import re
from pathlib import Path

from pith_archiver.cli import COMMANDS
from tests.test_layers import PRODUCT

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

# "checkpoint" is only the signed note of a key log (pith/checkpoint.py). Besides the
# protocol core, the witness and the transparency wing, these modules handle such notes:
SAYS_CHECKPOINT = {
    "audit",  # audit --checkpoint FILE, the log checks' findings
    "audit_repair",  # a repair publishes a stale published checkpoint again
    "checkpoint_repair",
    "cli",  # the checkpoint command's entry
    "checkpoint",
    "prove",
    "sync",  # sync PEER: the peer's checkpoints, cosigned with --witness-policy; where each log got to
    "witness",
    "commit",  # a commit publishes its log's new checkpoint
    "cosign",  # the transparency wing's modules, wherever the wing lies
    "cosigning",  # a policy's witnesses cosign checkpoints
    "export",  # a bag copies the logs' checkpoints
    "export_card",
    "key_logs",
    "keyrings",  # the archive key signs checkpoints
    "layout",  # where checkpoints lie
    "log_proofs",
    "peer_files",  # serve ARCHIVE: a peer reads its logs' checkpoints
    "proof_files",  # verify --proof: proofs end at a checkpoint
    "repair",  # a peer repaired from must publish a checkpoint of a pinned key
    "stores",  # the published checkpoint is the one object replaced
    "tiles",
    "witness_client",
}
LOG_PACKAGES = {"pith", "witness", "transparency", "syncing"}  # syncing: a peer's log, read
# words that give "checkpoint" the meaning of the interim commit, in one sentence
INTERIM = re.compile(
    r"\b(interim|crawl goes on|every \S+ bundles|PITH_COMMIT_EVERY|--commit-every|\d+,000-bundle|of a (long )?crawl)\b",
    re.I,
)
SENTENCE_WITH_CHECKPOINT = re.compile(r"[^.|]*\bcheckpoints?\b[^.|]*", re.I)


def product_modules() -> list[Path]:
    return [path for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))]


def interim_checkpoints(text: str) -> list[str]:
    """The sentences of ``text`` that call the interim commit a checkpoint."""
    return [" ".join(s.split())[:120] for s in SENTENCE_WITH_CHECKPOINT.findall(text) if INTERIM.search(s)]


def test_only_the_logs_modules_say_checkpoint():
    """The crawl, the pipelines and the archive's writing side commit runs (an interim
    commit, then the final one): none of them speaks of checkpoints."""
    saying = [
        str(path.relative_to(ROOT))
        for path in product_modules()
        if not LOG_PACKAGES & set(path.relative_to(ROOT).parts)
        and path.stem not in SAYS_CHECKPOINT
        and re.search(r"checkpoint", path.read_text("utf-8"), re.I)
    ]
    assert saying == []


def test_no_sentence_calls_the_interim_commit_a_checkpoint():
    found = {
        str(path.relative_to(ROOT)): interim_checkpoints(path.read_text("utf-8"))
        for path in [*product_modules(), *DOCS]
    }
    assert {path: sentences for path, sentences in found.items() if sentences} == {}


def test_the_sentence_check_sees_the_old_wording():
    assert interim_checkpoints("Commit a manifest every N bundles (a checkpoint, while the crawl goes on).")
    assert interim_checkpoints("each checkpoint of a long crawl is a run of its own")
    assert not interim_checkpoints("The published checkpoint is the newest. An interim commit is a run.")


# "manifest" is only the signed run manifest: /pith-mirrors.json is the mirror list (its wire
# value "pith_mirror_manifest" stays, pith.links.MIRROR_LIST_TYPE) and a BagIt bag's checksum
# lists are bag manifests, BagIt's word
MANIFEST_MISUSES = re.compile(
    r"\bmirror[ _]manifests?\b|\b(?:resolver|registry)'s manifest\b|\bmirrors? (?:the|its) manifest\b"
    r"|\bsha(?:256|512)(?: and sha512)? manifests?\b",
    re.I,
)


def manifest_misuses(text: str) -> list[str]:
    """Where ``text`` calls the mirror list, or a bag's checksum lists, a manifest."""
    return [" ".join(found.split()) for found in MANIFEST_MISUSES.findall(text)]


def test_only_a_run_manifest_is_called_a_manifest():
    found = {
        str(path.relative_to(ROOT)): manifest_misuses(path.read_text("utf-8")) for path in [*product_modules(), *DOCS]
    }
    assert {path: misuses for path, misuses in found.items() if misuses} == {}


def test_the_manifest_check_sees_the_old_wording():
    assert manifest_misuses("the URL patterns of its mirror manifest (`/pith-mirrors.json`)")
    assert manifest_misuses("every mirror the resolver's manifest lists, and the mirrors the manifest lists")
    assert manifest_misuses("def mirror_manifest(base): ...")
    assert manifest_misuses("a BagIt bag (sha256 and sha512 manifests)")
    assert not manifest_misuses('"manifest_type": "pith_mirror_manifest"; sha256 and sha512 bag manifests')
    assert not manifest_misuses("every object the run manifest lists; the mirror list names the mirrors")


def open_run_misuses(source: str) -> list[str]:
    """Where ``open_run`` names anything but a ``storage.writing.open_run.OpenRun``: a run id
    is a ``run_id``."""
    tree = ast.parse(source)
    has_type = any(
        isinstance(node, ast.ImportFrom) and any(alias.name == "OpenRun" for alias in node.names)
        for node in ast.walk(tree)
    )
    misuses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg == "open_run":
            if not (isinstance(node.annotation, ast.Name) and node.annotation.id == "OpenRun"):
                misuses.append(f"line {node.lineno}: argument open_run is not an OpenRun")
        elif isinstance(node, ast.keyword) and node.arg == "open_run":
            misuses.append(f"line {node.lineno}: keyword open_run=")
        elif isinstance(node, ast.Name) and node.id == "open_run" and not has_type:
            misuses.append(f"line {node.lineno}: open_run in a module that has no OpenRun")
    return misuses


def test_open_run_is_only_the_run_being_written():
    found = {str(path.relative_to(ROOT)): open_run_misuses(path.read_text("utf-8")) for path in product_modules()}
    assert {path: misuses for path, misuses in found.items() if misuses} == {}


def test_the_open_run_check_sees_a_run_id_called_open_run():
    assert open_run_misuses("def committed(open_run: str) -> None: ...") != []
    assert open_run_misuses("send(signal, open_run=run)") != []
    assert open_run_misuses("open_run = writer.current_run") != []
    assert open_run_misuses("from .open_run import OpenRun\ndef commit(open_run: OpenRun): open_run.settle()") == []


def documented_signal_arguments() -> dict[str, set[str]]:
    """Each signal of crawler/signals.py: the ``names`` its comment gives."""
    documented: dict[str, set[str]] = {}
    comment: list[str] = []
    for line in (ROOT / "crawler" / "signals.py").read_text("utf-8").splitlines():
        if line.startswith("#"):
            comment.append(line)
        elif match := re.match(r"(\w+) = object\(\)", line):
            documented[match.group(1)] = set(re.findall(r"``(\w+)``", " ".join(comment)))
            comment = []
    return documented


def sent_signal_arguments() -> dict[str, set[str]]:
    """Each of our signals the product sends: the keyword arguments it is sent with."""
    ours = set(documented_signal_arguments())
    sent: dict[str, set[str]] = {}
    for path in product_modules():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "send_catch_log" and node.args):
                continue
            signal = node.args[0]
            name = signal.attr if isinstance(signal, ast.Attribute) else getattr(signal, "id", "")
            if name in ours:
                sent.setdefault(name, set()).update(keyword.arg for keyword in node.keywords if keyword.arg)
    return sent


def test_signals_are_documented_as_sent():
    """The arguments crawler/signals.py names for each signal are those it is sent with."""
    documented = documented_signal_arguments()
    sent = sent_signal_arguments()
    assert set(sent) == set(documented)  # every signal is sent somewhere
    assert {name: args for name, args in documented.items() if sent[name] != args} == {}


def test_each_command_module_is_named_for_its_command():
    """``pith_archiver/commands/X.py`` holds command X, and the wing holds nothing else."""
    assert {
        name: target for name, (target, _) in COMMANDS.items() if target != f"pith_archiver.commands.{name}:{name}"
    } == {}
    modules = {path.stem for path in (ROOT / "pith_archiver" / "commands").glob("*.py")} - {"__init__"}
    assert modules == set(COMMANDS)
