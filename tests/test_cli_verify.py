"""``pith-archiver verify``: one line per bundle and a closing count, ``--json`` lines
for machines, the exit status contract, over files, folders (a corpus, an archive)
and http URLs, on one or more processes."""

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import threading
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pith.links import links_for
from pith_archiver.exit_status import ExitStatus
from pith_archiver.ordered_pool import WORTH_A_POOL
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.serving.source import BUNDLES_DIR, KEYRING_NAME
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.archives import tampered as tampered_bundle
from tests.plugins.cli import run_cli
from tests.plugins.core import real_bundle_paths
from tests.tamper import tampered


@pytest.fixture
def corpus(tmp_path, real_raw):
    """The real bundles, one tampered copy in a subdirectory, and a file that is not JSON."""
    for path in real_bundle_paths():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "nested").mkdir()
    suffix, raw = sorted(real_raw.items())[0]
    (tmp_path / "nested" / "bad.json").write_bytes(tampered(raw, "title_hash_char_changed"))
    (tmp_path / "notes.txt").write_text("not a bundle")
    return tmp_path


@pytest.fixture
def served(corpus):
    """A plain stdlib web server on a loopback port, serving the corpus directory."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(corpus))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_lines_and_closing_count(corpus, real_docs):
    result = run_cli("verify", str(corpus))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 5  # four bundles, notes.txt skipped, the count
    verified = [line for line in lines if line.startswith("VERIFIED")]
    assert sorted(line.split()[1] for line in verified) == sorted(doc["pith_number"] for doc in real_docs.values())
    (rejected,) = [line for line in lines if line.startswith("REJECTED")]
    first = real_docs[sorted(real_docs)[0]]
    assert rejected.split()[1] == first["pith_number"]
    assert "bad.json" in rejected
    assert "canonical_hash_mismatch at canonical_sha256" in rejected
    assert lines[-1] == "3 verified, 1 rejected"


def test_json_lines(corpus):
    result = run_cli("verify", "--json", str(corpus))
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 4
    assert {r["status"] for r in records} == {"verified", "rejected"}
    bad = next(r for r in records if r["status"] == "rejected")
    assert (bad["reason"], bad["path"]) == ("canonical_hash_mismatch", "canonical_sha256")
    assert bad["source"].endswith("bad.json")
    for record in records:
        if record["status"] == "verified":
            assert record["reason"] is None and record["path"] is None
            assert record["pith_number"].startswith("pith:") and len(record["bundle_sha256"]) == 64
    assert result.stderr.strip() == "3 verified, 1 rejected"


def test_all_verified_exits_zero(real_docs):
    paths = [str(p) for p in real_bundle_paths()]
    result = run_cli("verify", *paths)
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == f"{len(paths)} verified, 0 rejected"


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-option"],
        ["--max-bytes", "0"],
        ["--max-nesting", "1"],
        ["--no-default-keys"],  # nothing left to trust
        ["--keyring", "/nonexistent/keys.json"],
    ],
)
def test_usage_errors_exit_two(args):
    result = run_cli("verify", *args)
    assert result.returncode == 2
    assert "VERIFIED" not in result.stdout


def test_directory_without_bundles_is_a_usage_error(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing here")
    result = run_cli("verify", str(tmp_path))
    assert result.returncode == 2
    assert "no *.json or *.jsonl files" in result.stderr


def test_unreadable_path_is_counted_and_partial(tmp_path):
    result = run_cli("verify", str(real_bundle_paths()[0]), str(tmp_path / "missing.json"))
    assert result.returncode == 3  # some could not be read, none rejected
    assert result.stdout.splitlines()[1].startswith("UNREADABLE")
    assert result.stdout.splitlines()[-1] == "1 verified, 0 rejected, 1 unreadable"


@pytest.mark.parametrize(
    "mutation, args, reason",
    [
        (None, ["--max-bytes", "4096"], "too_large"),  # a real bundle is ~13 KB
        (None, ["--max-nesting", "4"], "too_deep"),  # and 8 deep
        ("invalid_utf8", [], "invalid_utf8"),
        ("nan_literal", [], "non_finite_number"),
    ],
)
def test_limits_and_hostile_bytes(tmp_path, real_raw, mutation, args, reason):
    raw = next(iter(real_raw.values()))
    path = tmp_path / "doc.json"
    path.write_bytes(tampered(raw, mutation) if mutation else raw)
    result = run_cli("verify", "--json", *args, str(path))
    assert result.returncode == 1
    assert json.loads(result.stdout)["reason"] == reason


def test_http_urls(served, real_docs):
    names = [p.name for p in real_bundle_paths()]
    urls = [f"{served}/{name}" for name in names] + [f"{served}/nested/bad.json", f"{served}/missing.json"]
    result = run_cli("verify", "--json", *urls)
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["status"] for r in records] == ["verified"] * len(names) + ["rejected", "unreadable"]
    assert [r["pith_number"] for r in records[:3]] == [real_docs[n.split(".")[0]]["pith_number"] for n in names]
    assert "404" in records[-1]["detail"]


def test_http_urls_all_verified_exit_zero(served):
    result = run_cli("verify", *(f"{served}/{p.name}" for p in real_bundle_paths()))
    assert result.returncode == 0


@pytest.mark.slow
def test_exit_codes_from_a_real_process(corpus):
    """The installed entry point, as a shell would see it."""
    command = [sys.executable, "-c", "from pith_archiver.cli import main; main()", "verify"]
    real = [str(p) for p in real_bundle_paths()]
    codes = [
        subprocess.run(command + args, capture_output=True, timeout=60).returncode
        for args in (real, [str(corpus)], ["--max-nesting", "0"])
    ]
    assert codes == [0, 1, 2]


def test_a_closed_output_ends_the_command_silently_as_sigpipe_would(corpus):
    """The reader of stdout gone before the first line: exit 141, nothing on stderr
    (before: "Error: BrokenPipeError", exit 4, and a second error as Python exited)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    command = [sys.executable, "-c", "from pith_archiver.cli import main; main()", "verify", str(corpus)]
    result = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, timeout=60)
    os.close(write_end)
    assert (result.returncode, result.stderr) == (ExitStatus.OUTPUT_CLOSED, b"")


@pytest.mark.skipif(not shutil.which("head"), reason="needs head(1)")
def test_verify_into_head_prints_its_lines_and_no_error(tmp_path):
    """As a user pipes it: head takes two lines and leaves while verify has more to say
    (1,000 lines, past what a pipe holds); verify stops there, 141, not a word more."""
    real = real_bundle_paths()[0]
    for index in range(1000):
        os.link(real, tmp_path / f"{index:04}.bundle.json")
    verify = f"{sys.executable} -c 'from pith_archiver.cli import main; main()' verify {tmp_path}"
    script = f"{verify} | head -n 2; echo \"status ${{PIPESTATUS[0]}}\" >&2"
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert len(result.stdout.splitlines()) == 2
    assert result.stderr.strip() == f"status {int(ExitStatus.OUTPUT_CLOSED)}", result.stderr


# --- through the real command line, in a subprocess -------------------------------


def run_verify(tmp_path, *args):
    """``pith-archiver verify ARGS`` in a real process, which never ends in a traceback."""
    result = run_cli("verify", *args, home=tmp_path, timeout=180)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_a_corpus_folder_skips_its_index_and_keyring(tmp_path, corpus_dir):
    bundles = sorted((corpus_dir / BUNDLES_DIR).glob("*.json"))
    result = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, corpus_dir)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert lines[-1] == f"{len(bundles)} verified, 0 rejected, 2 skipped (not bundles)"
    assert f"SKIPPED     {corpus_dir / 'corpus.json'}  not a bundle (a corpus index)" in lines
    assert f"SKIPPED     {corpus_dir / KEYRING_NAME}  not a bundle (a keyring)" in lines
    assert sum(line.startswith("VERIFIED") for line in lines) == len(bundles)
    assert result.stderr == ""  # no progress on a pipe


def test_progress_on_a_terminal(corpus_dir):
    """stderr on a pseudo-terminal: the progress bar is drawn there, stdout keeps the lines."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "pith_archiver", "verify", "--keyring", str(corpus_dir / KEYRING_NAME), str(corpus_dir)],
        stdout=subprocess.PIPE,
        stderr=follower,
    ) as child:
        os.close(follower)
        stdout, _ = child.communicate(timeout=120)
    drawn = b""
    while select.select([leader], [], [], 0.5)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the child
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert child.returncode == 0
    assert b"verifying" in drawn and b"Traceback" not in drawn
    assert stdout.decode().splitlines()[-1].endswith("0 rejected, 2 skipped (not bundles)")


@pytest.mark.slow
def test_an_archive_folder_stands_for_its_raw_bundles_and_feeds(tmp_path, corpus_dir, corpus_keyring, test_signer):
    archive = tmp_path / "archive"
    raws = list(corpus_raws(corpus_dir).values())
    write_run(LocalStore(archive), test_signer, corpus_keyring, raws[:3], rejected=[tampered_bundle(raws[5])])
    write_run(LocalStore(archive), test_signer, corpus_keyring, raws[3:5])
    key_document = archive / layout.key_document(test_signer.key_id)
    feeds = sorted((archive / layout.ATTESTATIONS).glob("*.jsonl"))
    result = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, "--keyring", key_document, archive)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    verified = [line for line in lines if line.startswith("VERIFIED")]
    assert [line.split()[-1] for line in verified if " feed " not in line] == [
        str(p) for p in sorted((archive / layout.RAW).rglob("*.json"))
    ]
    feed_lines = [line.split() for line in verified if " feed " in line]
    assert [line[2] for line in feed_lines] == [str(p) for p in feeds]
    assert sorted(int(line[3]) for line in feed_lines) == [2, 3]  # runs in one second: names need not sort by run
    skipped = [line for line in lines if line.startswith("SKIPPED")]
    assert sum("(an archive manifest)" in line for line in skipped) == 2
    assert sum("(a key document)" in line for line in skipped) == 1
    assert all("quarantine" not in line for line in verified)
    assert lines[-1] == f"7 verified, 0 rejected, {len(skipped)} skipped (not bundles)"

    without_its_key = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, archive)
    assert without_its_key.returncode == 1
    assert without_its_key.stdout.count("unknown_key") == 2  # both feeds; the bundles still verify


def test_a_record_page_is_not_a_bundle(tmp_path, mirror, corpus_dir, corpus_catalog):
    server = mirror()
    suffix = min(corpus_raws(corpus_dir))
    page, bundle = links_for(suffix, server.url)["resolver"], links_for(suffix, server.url)["bundle"]
    alone = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, page)
    assert alone.returncode == 4  # nothing could be verified
    assert alone.stdout.splitlines() == [
        f"SKIPPED     {page}  not a bundle (text/html)",
        "0 verified, 0 rejected, 1 skipped (not bundles)",
    ]
    beside = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, page, bundle)
    assert beside.returncode == 0
    assert beside.stdout.splitlines()[-1] == "1 verified, 0 rejected, 1 skipped (not bundles)"
    assert "malformed_json" not in alone.stdout + beside.stdout


def test_a_mirrors_state_documents_are_counted_and_checked_against_their_bundles(tmp_path, mirror, corpus_dir):
    """A copy of a mirror (``wget -m``: ``pith/<ID>/bundle.json`` and ``state.json``):
    each state document is compared with the state of the bundle beside it, never
    judged as a bundle; one holding another record's state is rejected as such."""
    server = mirror()
    suffixes = sorted(corpus_raws(corpus_dir))[:3]
    for suffix in suffixes:
        links = links_for(suffix, server.url)
        for name in ("bundle", "state"):
            with urllib.request.urlopen(links[name], timeout=10) as response:
                target = tmp_path / "copy" / "pith" / suffix / f"{name}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(response.read())
    swapped = tmp_path / "copy" / "pith" / suffixes[2] / "state.json"
    swapped.write_bytes((tmp_path / "copy" / "pith" / suffixes[0] / "state.json").read_bytes())
    result = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, tmp_path / "copy")
    assert result.returncode == 1, result.stdout
    lines = result.stdout.splitlines()
    assert sum(line.startswith("VERIFIED    pith:") for line in lines) == 3
    assert f"REJECTED    state  {swapped}  wrong_record at <document>: " in result.stdout
    assert "schema_violation" not in result.stdout
    assert (
        lines[-1] == "3 verified, 1 rejected, 2 skipped (not bundles, 2 of them state documents: 2 match their bundle)"
    )

    state, bundle = links_for(suffixes[0], server.url)["state"], links_for(suffixes[0], server.url)["bundle"]
    alone = run_verify(tmp_path, "--keyring", corpus_dir / KEYRING_NAME, state)
    assert alone.returncode == 4  # nothing verified: a state document is not a bundle
    assert alone.stdout.splitlines()[0] == (
        f"SKIPPED     {state}  not a bundle (a state document, matching the state in {bundle})"
    )


@pytest.fixture
def many(tmp_path, corpus_dir, real_raw):
    """More documents than it takes to start worker processes: the corpus twice over,
    a tampered bundle among them, and its keyring."""
    for copy in ("a", "b"):
        shutil.copytree(corpus_dir / BUNDLES_DIR, tmp_path / copy)
    (tmp_path / "a" / "m-bad.json").write_bytes(tampered(next(iter(real_raw.values())), "title_hash_char_changed"))
    shutil.copy(corpus_dir / KEYRING_NAME, tmp_path / KEYRING_NAME)
    assert len(list(tmp_path.rglob("*.json"))) > WORTH_A_POOL
    return tmp_path


def test_jobs_keep_the_input_order(tmp_path, many):
    one = run_verify(tmp_path, "--jobs", "1", "--keyring", many / KEYRING_NAME, many)
    two = run_verify(tmp_path, "--jobs", "2", "--keyring", many / KEYRING_NAME, many)
    assert one.returncode == two.returncode == 1
    assert two.stdout == one.stdout
    sources = [
        line.split()[-1] if line.startswith("VERIFIED") else line.split()[2] for line in one.stdout.splitlines()[:-1]
    ]
    assert sources == sorted(sources)  # the folder's sorted order
    assert one.stdout.splitlines()[-1].endswith("1 rejected, 1 skipped (not bundles)")


def test_quiet_prints_only_what_failed_and_the_summary(many, tmp_path):
    missing = tmp_path / "missing.json"
    result = run_verify(tmp_path, "-q", "--keyring", many / KEYRING_NAME, many, missing)
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert [line.split()[0] for line in lines[:-1]] == ["REJECTED", "UNREADABLE"]
    assert "m-bad.json" in lines[0] and str(missing) in lines[1]
    assert lines[-1].endswith(", 1 rejected, 1 unreadable, 1 skipped (not bundles)")
    assert result.stderr == ""
    clean = run_verify(tmp_path, "-q")  # the shipped real bundles
    assert (clean.returncode, clean.stdout) == (0, f"{len(real_bundle_paths())} verified, 0 rejected\n")


def test_exit_status_for_each_outcome(tmp_path, real_raw):
    real = real_bundle_paths()[0]
    (tmp_path / "bad.json").write_bytes(tampered(next(iter(real_raw.values())), "title_hash_char_changed"))
    (tmp_path / "not-a-keyring.json").write_text("[1, 2]")
    missing = tmp_path / "missing.json"
    outcomes = {
        "verified": ([real], ExitStatus.OK),
        "rejected": ([real, tmp_path / "bad.json", missing], ExitStatus.REJECTED),
        "partly unreadable": ([real, missing], ExitStatus.PARTIAL),
        "nothing readable": ([missing], ExitStatus.FAILED),
    }
    for name, (args, status) in outcomes.items():
        assert run_verify(tmp_path, *args).returncode == status, name
    for args in (["--keyring", tmp_path / "not-a-keyring.json"], [tmp_path / "empty"]):
        (tmp_path / "empty").mkdir(exist_ok=True)
        result = run_verify(tmp_path, *args)
        assert result.returncode == ExitStatus.USAGE
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("Error: "), result.stderr
        assert result.stdout == ""


def test_help_lists_every_command_without_importing_them():
    code = (
        "import sys; from click.testing import CliRunner; from pith_archiver.cli import COMMANDS, main; "
        "out = CliRunner().invoke(main, ['--help']).output; "
        "print(all(name in out and text in out for name, (_, text) in COMMANDS.items()), "
        "sorted(m for m in ('scrapy', 'pyarrow', 'boto3', 'twisted') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert result.stdout.split(maxsplit=1) == ["True", "[]\n"], result.stdout + result.stderr
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pith_archiver", "verify"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time")}
    assert run.returncode == 0 and not imported & {"scrapy", "pyarrow", "boto3", "twisted"}
    # nor the crawl's verifier worker, which brings the archive writer's rows: 0.09 s of start-up
    assert not imported & {"crawler.verifying.verify_worker", "storage.writing.prepared"}, sorted(imported)


def test_verifying_a_file_loads_nothing_only_other_paths_need(tmp_path):
    """ctypes (a folder store's syncfs), socket (an S3 lease, botocore's errors) and
    importlib.resources (the shipped bundles, read when no path is given) are found on
    first use: together they were a tenth of ``verify``'s start-up."""
    late = ["ctypes", "socket", "importlib.resources"]
    code = (
        "import sys, runpy; sys.argv = ['pith-archiver', 'verify', sys.argv[1]]\n"
        "try:\n    runpy.run_module('pith_archiver', run_name='__main__')\n"
        f"except SystemExit as done:\n    print(done.code, [m for m in {late!r} if m in sys.modules])\n"
    )
    bundle = real_bundle_paths()[0]
    result = subprocess.run(
        [sys.executable, "-c", code, str(bundle)], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.splitlines()[-1] == "0 []", result.stdout + result.stderr
    shipped = subprocess.run(
        [sys.executable, "-c", code.replace(", sys.argv[1]]", "]")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "3 verified" in shipped.stdout and shipped.stdout.splitlines()[-1] == "0 ['importlib.resources']"


def test_a_folder_lists_its_files_and_links_to_files_not_linked_folders(tmp_path):
    first, second = real_bundle_paths()[:2]
    folder = tmp_path / "bundles"
    (folder / "nested").mkdir(parents=True)
    shutil.copy(first, folder / first.name)
    shutil.copy(second, folder / "nested" / second.name)
    (folder / "linked.bundle.json").symlink_to(folder / first.name)  # a link to a file: checked
    (folder / "elsewhere").symlink_to(folder / "nested", target_is_directory=True)  # a linked folder: not entered
    (folder / "gone.bundle.json").symlink_to(tmp_path / "missing.json")  # leads nowhere: not a file
    (folder / "folder.json").mkdir()  # named like a document, but a folder
    result = run_verify(tmp_path, folder)
    assert result.returncode == 0, result.stdout + result.stderr
    sources = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("VERIFIED")]
    assert sources == sorted(str(folder / name) for name in (first.name, "linked.bundle.json", f"nested/{second.name}"))
    assert result.stdout.splitlines()[-1] == "3 verified, 0 rejected"


ERROR_PAGE = b"<html><head><title>503 Service Unavailable</title></head><body>try again later</body></html>"


def test_an_error_page_saved_as_a_bundle_is_rejected_in_a_folder_and_alone(tmp_path):
    folder = tmp_path / "bundles"
    folder.mkdir()
    for path in real_bundle_paths():
        shutil.copy(path, folder / path.name)
    failed = folder / "ZZZZZZZZZZZZZZZZZZZZZZZZZZ.bundle.json"
    failed.write_bytes(ERROR_PAGE)
    (folder / "notes.json").write_text('{"keys": []}')  # plainly a keyring: still skipped

    in_folder = run_verify(tmp_path, folder)
    assert in_folder.returncode == 1, in_folder.stdout
    assert f"REJECTED    -  {failed}  malformed_json at <document>: text/html where a bundle" in in_folder.stdout
    assert in_folder.stdout.splitlines()[-1] == "3 verified, 1 rejected, 1 skipped (not bundles)"

    alone = run_verify(tmp_path, failed)
    assert alone.returncode == 1
    assert alone.stdout.splitlines()[-1] == "0 verified, 1 rejected"


def test_json_that_claims_to_be_a_bundle_is_judged_not_skipped(tmp_path):
    by_name = tmp_path / "X.bundle.json"
    by_name.write_text('{"error": "upstream timed out"}')
    by_type = tmp_path / "other.json"
    by_type.write_text('{"bundle_type": "pith_open_graph_bundle"}')
    result = run_verify(tmp_path, by_name, by_type)
    assert result.returncode == 1
    assert result.stdout.count("REJECTED") == 2 and "schema_violation" in result.stdout
    assert result.stdout.splitlines()[-1] == "0 verified, 2 rejected"


def test_rejections_alike_are_told_once_with_their_fix(tmp_path, corpus_dir, test_signer):
    """The corpus's bundles with neither of its registry keys pinned (the test corpus's
    and the real registry's): the first rejection of each key is shown, then one line
    per key with the count and the fix, before the count; -v and --json list each;
    exit 1 alike."""
    key = tmp_path / "other-key.json"
    key.write_text(json.dumps(test_signer.public_document()))
    bundles = corpus_dir / BUNDLES_DIR
    total = len(list(bundles.glob("*.bundle.json")))
    fix = "pin it with --keyring FILE (a keyring holding that key, its fingerprint checked out of band)"
    args = ["verify", bundles, "--no-default-keys", "--keyring", key]
    for quiet in ([], ["-q"]):
        grouped = run_cli(*args, *quiet)
        assert grouped.returncode == 1
        *firsts, told_corpus, told_real, summary = grouped.stdout.splitlines()
        assert len(firsts) == 2 and all(line.startswith("REJECTED    pith:") for line in firsts)
        assert told_corpus == (
            f"{total - 3} bundles signed by a key not pinned (unknown_key at events[0].payload.receipt.key_id: "
            f"'pith-test-corpus-7' is not pinned): {fix}; -v lists each"
        )
        assert told_real.startswith("3 bundles signed by a key not pinned (") and "'pith-v1-2026-05'" in told_real
        assert summary == f"0 verified, {total} rejected"
    each = run_cli(*args, "-v")
    assert each.returncode == 1 and each.stdout.count("REJECTED    pith:") == total
    assert f"{total - 3} bundles signed by a key not pinned (" in each.stdout and "-v lists each" not in each.stdout
    as_json = run_cli(*args, "--json")
    assert as_json.returncode == 1 and len(as_json.stdout.splitlines()) == total
