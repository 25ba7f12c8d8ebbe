"""A scheduled archive while the registry changes under it: new event types, a key
rotation, versions this archiver does not know. Each is minted from the test corpus,
served by the project's mirror over real sockets, and crawled end to end through the
command line; then audited, and the tables read back."""

import hashlib
import json
import shutil

import pytest

from pith.keyring import Keyring, KeyringError, key_from_entry
from pith.reasons import Rejected
from pith.signing import Signer
from pith_testkit.corpus import corpus_signer
from pith_testkit.mint import sign_bundle
from storage.serving.record import compact_json
from storage.serving.source import BUNDLES_DIR, KEY_DOCUMENT_NAME, KEYRING_NAME, bundle_name
from tests.plugins.archives import corpus_raws
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.mirror import SMALL_CORPUS_SEED
from tests.plugins.tables import read_rows
from tests.tamper import NEW_EVENT_TYPES, tampered, wholly_resigned, with_new_event

ROTATION = "2026-07-01T00:00:00Z"  # the corpus key retires; every corpus bundle was built before
REBUILT_AT = "2026-08-01T00:00:00Z"  # bundles the registry rebuilt after the rotation
NEW_KEY = Signer.from_seed(
    "pith-test-registry-2026-07", hashlib.sha256(b"pith-archiver test registry key after rotation").digest()
)


@pytest.fixture(scope="module")
def raws(corpus_dir) -> dict[str, bytes]:
    return corpus_raws(corpus_dir)


def site(root, corpus_dir, bundles: dict[str, bytes], key_document: dict | None = None):
    """A corpus folder serving exactly ``bundles`` (suffix -> bytes), the corpus keyring,
    and the key document the resolver announces, if given."""
    (root / BUNDLES_DIR).mkdir(parents=True)
    for suffix, raw in bundles.items():
        (root / BUNDLES_DIR / bundle_name(suffix)).write_bytes(raw)
    shutil.copy(corpus_dir / KEYRING_NAME, root / KEYRING_NAME)
    if key_document is not None:
        (root / KEY_DOCUMENT_NAME).write_text(json.dumps(key_document))
    return root


def seeded(tmp_path, suffixes, *keyrings) -> list[str]:
    """Crawl options for exactly ``suffixes`` (from a seeds file), trusting only ``keyrings``."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(suffixes) + "\n")
    keys = [arg for path in keyrings for arg in ("--keyring", str(path))]
    return ["--seeds-file", str(seeds), "--no-follow", "--no-default-keys", *keys]


# --- new event types ----------------------------------------------------------------


@pytest.mark.slow
def test_records_gaining_new_event_types_are_archived_and_counted_apart(tmp_path, corpus_dir, raws, mirror):
    signer = corpus_signer(SMALL_CORPUS_SEED)
    suffixes = list(raws)[:8]
    bundles = {suffix: raws[suffix] for suffix in suffixes}
    for suffix, event_type in zip(suffixes, NEW_EVENT_TYPES):
        bundles[suffix] = with_new_event(raws[suffix], signer, event_type)
    server = mirror(site(tmp_path / "site", corpus_dir, bundles))

    result = run_cli_crawl(
        tmp_path, *seeded(tmp_path, suffixes, corpus_dir / KEYRING_NAME), resolver=server.url, out=tmp_path / "archive"
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert (result.stat("archived"), result.stat("rejected"), result.stat("merge_inferred")) == (8, 0, 6)
    assert all(result.stat(f"merge_inferred/{event_type}") == 1 for event_type in NEW_EVENT_TYPES)
    assert "merge inferred: 6 verified bundles hold event types whose merge rule is only inferred" in result.stdout

    records = {row["pith_number"].rsplit(":", 1)[1]: row for row in read_rows(tmp_path / "archive", "records")}
    assert set(records) == set(suffixes)
    for suffix, event_type in zip(suffixes, NEW_EVENT_TYPES):
        row = records[suffix]
        assert (row["merge_confirmed"], row["merge_inferred_types"], row["merge_inferred_match"]) == (
            False,
            [event_type],
            True,
        )
    assert {(records[s]["merge_confirmed"], records[s]["merge_inferred_types"]) for s in suffixes[6:]} == {(True, None)}
    verifications = [row for row in read_rows(tmp_path / "archive", "verifications") if row["merge_confirmed"] is False]
    assert sorted(t for row in verifications for t in row["merge_inferred_types"]) == sorted(NEW_EVENT_TYPES)
    assert {row["status"] for row in verifications} == {"verified"}

    audited = run_cli(
        "audit",
        tmp_path / "archive",
        "--no-default-keys",
        "--keyring",
        corpus_dir / KEYRING_NAME,
        home=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert "8 bundles (6 with a merge rule only inferred)" in audited.stdout


# --- key rotation ---------------------------------------------------------------------


@pytest.fixture
def rotated(tmp_path, corpus_dir, raws, mirror):
    """A registry that rotated from the corpus key to NEW_KEY at ROTATION: 6 records as
    built before (corpus key), 6 rebuilt after by the new key (their events wholly
    re-signed), and one rebuilt after the rotation yet signed by the retired key. The
    resolver announces the new key."""
    suffixes = list(raws)[:13]
    bundles = {suffix: raws[suffix] for suffix in suffixes[:6]}
    for suffix in suffixes[6:12]:
        bundle = json.loads(raws[suffix])
        bundle["built_at"] = REBUILT_AT
        bundles[suffix] = compact_json(wholly_resigned(bundle, NEW_KEY))
    late = json.loads(raws[suffixes[12]])
    late["built_at"] = REBUILT_AT
    bundles[suffixes[12]] = compact_json(sign_bundle(late, corpus_signer(SMALL_CORPUS_SEED), REBUILT_AT))
    server = mirror(site(tmp_path / "site", corpus_dir, bundles, key_document=NEW_KEY.public_document()))
    return server, suffixes


@pytest.mark.slow
def test_a_rotation_is_reported_up_front_and_in_the_summary(tmp_path, corpus_dir, rotated):
    server, suffixes = rotated
    result = run_cli_crawl(
        tmp_path, *seeded(tmp_path, suffixes, corpus_dir / KEYRING_NAME), resolver=server.url, out=tmp_path / "archive"
    )
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    notice = (
        f"notice: the registry announces signing key {NEW_KEY.key_id} (fingerprint {NEW_KEY.fingerprint}), "
        "which is not pinned"
    )
    assert notice in result.stderr
    assert f"keys pin {server.url}/pith-signing-key.json --fingerprint {NEW_KEY.fingerprint}" in result.stderr
    assert result.stats[f"pith/announced_keys/unpinned/{NEW_KEY.key_id}"] == NEW_KEY.fingerprint
    assert (result.stat("verified"), result.stat("rejected/unknown_key")) == (7, 6)
    assert "key rotation: 6 of 13 bundles" not in result.stdout  # not most of them: no rotation claimed
    assert f"unpinned key: the registry announces {NEW_KEY.key_id}" in result.stdout


@pytest.mark.slow
def test_most_bundles_unknown_key_says_the_registry_probably_rotated(tmp_path, corpus_dir, raws, mirror):
    suffixes = list(raws)[:5]
    bundles = {}
    for index, suffix in enumerate(suffixes):
        bundle = json.loads(raws[suffix])
        bundles[suffix] = raws[suffix] if index == 0 else compact_json(wholly_resigned(bundle, NEW_KEY))
    server = mirror(site(tmp_path / "site", corpus_dir, bundles, key_document={"keys": [NEW_KEY.public_document()]}))
    result = run_cli_crawl(
        tmp_path, *seeded(tmp_path, suffixes, corpus_dir / KEYRING_NAME), resolver=server.url, out=tmp_path / "archive"
    )
    assert result.returncode == 1
    assert (
        f"key rotation: 4 of 5 bundles are signed by keys not pinned ({NEW_KEY.key_id} 4): the registry has "
        f"probably rotated its key; it announces {NEW_KEY.key_id} (fingerprint {NEW_KEY.fingerprint})"
    ) in result.stdout


@pytest.mark.slow
def test_pinning_the_new_key_and_retiring_the_old_one(tmp_path, corpus_dir, rotated):
    """The operator's path: a run rejects the new key's bundles; the key is pinned and
    the old one retired; the next run fetches exactly the rejected bundles again (their
    validators were never kept) and archives them; a fresh archive rejects what the
    retired key signed after the rotation, and audit finds it in the old archive."""
    server, suffixes = rotated
    keyring = tmp_path / "keyring.json"
    shutil.copy(corpus_dir / KEYRING_NAME, keyring)
    assert (
        run_cli_crawl(
            tmp_path, *seeded(tmp_path, suffixes, keyring), resolver=server.url, out=tmp_path / "archive"
        ).stat("rejected/unknown_key")
        == 6
    )
    url = f"{server.url}/pith-signing-key.json"
    wrong = run_cli("keys", "pin", url, "--fingerprint", "0" * 32, "--into", str(keyring))
    assert wrong.returncode == 2
    assert f"no key with fingerprint {'0' * 32} (it offers: {NEW_KEY.key_id} {NEW_KEY.fingerprint})" in wrong.output
    pinned = run_cli(
        "keys", "pin", url, "--fingerprint", NEW_KEY.fingerprint, "--not-before", ROTATION, "--into", str(keyring)
    )
    assert pinned.returncode == 0, pinned.output
    old = corpus_signer(SMALL_CORPUS_SEED).key_id
    retired = run_cli("keys", "retire", old, "--at", ROTATION, "--into", str(keyring))
    assert retired.returncode == 0, retired.output

    again = run_cli_crawl(tmp_path, *seeded(tmp_path, suffixes, keyring), resolver=server.url, out=tmp_path / "archive")
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert "notice:" not in again.stderr
    assert again.stats["pith/announced_keys/pinned"] == 1
    assert (again.stat("bundles_fetched"), again.stat("verified"), again.stat("not_modified")) == (6, 6, 7)
    assert len(read_rows(tmp_path / "archive", "records")) == 13
    audited = run_cli(
        "audit",
        tmp_path / "archive",
        "--no-default-keys",
        "--keyring",
        keyring,
        home=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert audited.returncode == 1
    assert "bundle_rejected" in audited.stdout and f"key_retired at bundle_signature.key_id: {old}" in audited.stdout

    fresh = run_cli_crawl(tmp_path, *seeded(tmp_path, suffixes, keyring), resolver=server.url, out=tmp_path / "fresh")
    assert fresh.returncode == 1, fresh.stdout + fresh.stderr[-3000:]
    assert (fresh.stat("verified"), fresh.stat("rejected"), fresh.stat("rejected/key_retired")) == (12, 1, 1)
    retired_row = next(row for row in read_rows(tmp_path / "fresh", "verifications") if row["reason"] == "key_retired")
    assert retired_row["pith_number"].endswith(suffixes[12])
    assert retired_row["detail_path"] == "bundle_signature.key_id"


def test_a_retired_key_keeps_what_it_signed_before(tmp_path, corpus_dir, raws):
    """Offline, through `verify`: the old key's bundles verify under its window; the
    same record rebuilt after the rotation by the old key does not."""
    keyring = tmp_path / "keyring.json"
    shutil.copy(corpus_dir / KEYRING_NAME, keyring)
    old = corpus_signer(SMALL_CORPUS_SEED)
    assert run_cli("keys", "retire", old.key_id, "--at", ROTATION, "--into", str(keyring)).returncode == 0
    suffix, raw = next(iter(raws.items()))
    late = json.loads(raw)
    late["built_at"] = REBUILT_AT
    (tmp_path / "before.json").write_bytes(raw)
    (tmp_path / "after.json").write_bytes(compact_json(sign_bundle(late, old, REBUILT_AT)))
    result = run_cli(
        "verify",
        "--no-default-keys",
        "--keyring",
        str(keyring),
        str(tmp_path / "before.json"),
        str(tmp_path / "after.json"),
    )
    assert result.returncode == 1
    assert f"VERIFIED    {json.loads(raw)['pith_number']}" in result.output
    assert f"key_retired at bundle_signature.key_id: {old.key_id} retired at {ROTATION}" in result.output


# --- versions this archiver does not know --------------------------------------------------


@pytest.mark.slow
def test_unknown_versions_are_quarantined_and_named(tmp_path, corpus_dir, raws, mirror):
    signer = corpus_signer(SMALL_CORPUS_SEED)
    suffixes = list(raws)[:4]
    bundles = {suffix: raws[suffix] for suffix in suffixes}
    bundles[suffixes[0]] = tampered(raws[suffixes[0]], "bundle_version_bumped", signer)
    bundles[suffixes[1]] = tampered(raws[suffixes[1]], "merge_version_bumped", signer)
    server = mirror(site(tmp_path / "site", corpus_dir, bundles))
    result = run_cli_crawl(
        tmp_path, *seeded(tmp_path, suffixes, corpus_dir / KEYRING_NAME), resolver=server.url, out=tmp_path / "archive"
    )
    assert result.returncode == 1
    assert (result.stat("verified"), result.stat("rejected/unsupported_version")) == (2, 2)
    assert (
        "unknown versions: bundle_version=2.0 1, merge_version=pith-open-graph-merge-v2 1: this archiver does "
        "not know them; upgrade pith-archiver"
    ) in result.stdout
    quarantined = [
        row for row in read_rows(tmp_path / "archive", "verifications") if row["reason"] == "unsupported_version"
    ]
    assert sorted(row["detail_path"] for row in quarantined) == ["bundle_version", "merge_version"]
    assert all(row["raw_path"].startswith("quarantine/") for row in quarantined)


# --- keyring windows ------------------------------------------------------------------------


def test_a_key_pinned_twice_keeps_the_narrower_window():
    entry = NEW_KEY.public_document()
    ring = Keyring(
        [
            key_from_entry({**entry, "not_before": "2026-01-01T00:00:00Z"}),
            key_from_entry({**entry, "rotates_at": "2027-01-01T00:00:00Z"}),
            key_from_entry({**entry, "not_after": "2028-01-01T00:00:00Z"}),
        ]
    )
    key = ring.get(NEW_KEY.key_id)
    assert (key.document()["not_before"], key.document()["not_after"]) == (
        "2026-01-01T00:00:00Z",
        "2027-01-01T00:00:00Z",
    )


@pytest.mark.parametrize(
    "window, message",
    [
        ({"not_after": "soon"}, "not_after 'soon' is not an RFC 3339 timestamp with a zone"),
        ({"not_before": "2026-07-01T00:00:00"}, "not_before '2026-07-01T00:00:00' is not an RFC 3339 timestamp"),
        (
            {"not_before": "2027-01-01T00:00:00Z", "not_after": "2026-01-01T00:00:00Z"},
            "not_before is not before its end",
        ),
    ],
)
def test_a_bad_window_is_a_keyring_error(tmp_path, window, message):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{**NEW_KEY.public_document(), **window}]}))
    with pytest.raises(KeyringError, match=message):
        Keyring.build([path])
    result = run_cli("verify", "--keyring", str(path), str(path))
    assert result.returncode == 2 and message in result.output


def test_an_event_without_a_date_cannot_pass_a_window():
    """A retired key's window cannot be dodged by leaving the date out."""
    ring = Keyring([key_from_entry({**NEW_KEY.public_document(), "not_after": ROTATION})])
    key = ring.get(NEW_KEY.key_id)
    with pytest.raises(Rejected) as missing:
        key.check_window("events[1].signature.key_id", created_at=None)
    assert missing.value.reason == "schema_violation"
    key.check_window("events[1].signature.key_id", created_at="2026-06-30T23:59:59Z")
    with pytest.raises(Rejected) as late:
        key.check_window("events[1].signature.key_id", created_at="2026-07-01T00:00:01Z")
    assert late.value.reason == "key_retired"


def test_keys_pin_and_retire_refuse_bad_input_in_one_line(tmp_path):
    keyring = tmp_path / "keys.json"
    impostor = {**Signer.from_seed(NEW_KEY.key_id, b"\x07" * 32).public_document()}
    keyring.write_text(json.dumps({"keys": [impostor]}))
    document = tmp_path / "announced.json"
    document.write_text(json.dumps(NEW_KEY.public_document()))
    not_json = tmp_path / "page.html"
    not_json.write_text("<html>moved</html>")
    cases = [
        (
            ["pin", str(document), "--fingerprint", NEW_KEY.fingerprint, "--into", str(keyring)],
            f"key_id {NEW_KEY.key_id} is pinned twice with different keys",
        ),
        (
            ["pin", str(not_json), "--fingerprint", NEW_KEY.fingerprint, "--into", str(tmp_path / "k.json")],
            "not a key document (malformed_json",
        ),
        (
            ["pin", str(tmp_path / "absent.json"), "--fingerprint", NEW_KEY.fingerprint, "--into", str(keyring)],
            "No such file or directory",
        ),
        (["pin", str(document), "--fingerprint", "xyz", "--into", str(keyring)], "32 hex digits"),
        (["retire", "no-such-key", "--at", ROTATION, "--into", str(keyring)], "no key no-such-key there"),
        (["retire", NEW_KEY.key_id, "--at", "next week", "--into", str(keyring)], "an RFC 3339 timestamp"),
    ]
    for args, message in cases:
        result = run_cli("keys", *args)
        assert result.returncode == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output, (args, result.output)
    assert json.loads(keyring.read_text()) == {"keys": [impostor]}  # nothing written by a refused command
