"""``pith-archiver checkpoint`` and ``prove``: the archive's transparency logs for
witnesses and third parties; and the offline check of a proof behind ``verify --proof``."""

import base64
import json
from collections.abc import Collection

import click

from pith.canonical import canon
from pith.checkpoint import open_checkpoint
from pith.keyring import Keyring
from pith.parse import Limits, parse
from pith.policy import Policy
from pith.proof import check_proof
from pith.reasons import Rejected
from pith.signed_note import NOTE_KEY, VerifierKey
from pith.tlog_proof import MAX_PROOF_BYTES, check_tlog_proof, tlog_proof
from pith.verify import Status
from storage.archive import layout
from storage.archive.reader import NothingCommitted
from storage.archive.stores import ObjectStore, StorageError
from storage.log_proofs import NotAttested, checkpoint_notes, prove_record
from storage.transparency.key_logs import LogBroken

from .archive_reading import TRUST_HELP, Trust, nothing_trusted, open_archive, trust_options
from .exit_status import ConfigError, ExitStatus, RunFailed
from .output import echo, log_to_stderr, verbosity_options

PROOF_LIMITS = Limits(max_bytes=1 << 20)


class NoProof(click.ClickException):
    """The archive cannot prove what was asked (nothing attested, or its log is broken): one line, exit 1."""

    exit_code = ExitStatus.REJECTED


@click.command(epilog=TRUST_HELP)
@click.argument("archive")
@click.option("--key", "key_id", help="Only the log of this archiver key.")
@click.option(
    "--vkey", is_flag=True, help="Print each log's origin and its C2SP signed-note verifier key instead, to pin."
)
@trust_options
@verbosity_options
def checkpoint(
    archive: str,
    key_id: str | None,
    vkey: bool,
    trust: Trust,
    verbosity: int,
) -> None:
    """Print the latest signed checkpoint of each archiver key's log in ARCHIVE (a folder
    or s3://bucket/prefix), for a witness to keep: a C2SP signed note giving the log's
    origin, size and root hash. Save one and check the archive against it later with
    `pith-archiver audit ARCHIVE --checkpoint FILE`. Notes of several keys are separated
    by a blank line. With --vkey, one line per log: ORIGIN VKEY."""
    log_to_stderr(verbosity)
    store, keyring = open_archive(archive, trust)
    try:
        notes = checkpoint_notes(store, keyring)
    except NothingCommitted as exc:
        raise nothing_trusted(archive, exc) from None
    except LogBroken as exc:
        raise NoProof(str(exc)) from None
    except StorageError as exc:
        raise RunFailed(str(exc)) from None
    if key_id is not None:
        notes = {key: note for key, note in notes.items() if key == key_id}
    if not notes:
        raise NoProof(f"{archive} has no checkpoint" + (f" of key {key_id}" if key_id else ""))
    if vkey:
        for note in notes.values():
            log, key = open_checkpoint(note, keyring)
            echo(f"{log.origin} {VerifierKey(log.origin, NOTE_KEY, key.raw)}")
        return
    echo("\n".join(notes.values()), nl=False)


@click.command(epilog=TRUST_HELP)
@click.argument("archive")
@click.argument("pith_number")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the proof as one JSON object (for `pith-archiver verify --proof FILE`).",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["text", "json", "tlog-proof"]),
    default="text",
    help="tlog-proof: a c2sp.org/tlog-proof@v1 file with the cosigned checkpoint (for `verify --proof FILE "
    "--policy FILE`); json is --json.",
)
@trust_options
@verbosity_options
def prove(
    archive: str,
    pith_number: str,
    as_json: bool,
    form: str,
    trust: Trust,
    verbosity: int,
) -> None:
    """Prove that the latest storage attestation of PITH_NUMBER is in its archiver key's
    log in ARCHIVE: the attestation, its leaf index, and the RFC 9162 inclusion proof up
    to the key's latest signed checkpoint. Anyone holding the archiver's public key
    checks it offline in O(log n) (docs/TRANSPARENCY.md)."""
    log_to_stderr(verbosity)
    store, keyring = open_archive(archive, trust)
    try:
        document = prove_record(store, keyring, pith_number)
    except (NotAttested, LogBroken) as exc:
        raise NoProof(str(exc)) from None
    except NothingCommitted as exc:
        raise nothing_trusted(archive, exc) from None
    except StorageError as exc:
        raise RunFailed(str(exc)) from None
    if as_json or form == "json":
        echo(json.dumps(document, ensure_ascii=False))
        return
    if form == "tlog-proof":
        note = published_or_committed(store, document)
        proof = [base64.b64decode(node) for node in document["inclusion_proof"]]
        echo(tlog_proof(canon(document["attestation"]), document["leaf_index"], proof, note), nl=False)
        return
    echo(f"{document['pith_number']}  attestation {document['attestation']['event_id']}")
    echo(f"leaf {document['leaf_index']} of {document['tree_size']}; inclusion proof:")
    for node in document["inclusion_proof"]:
        echo(f"  {node}")
    echo(document["checkpoint"], nl=False)


def published_or_committed(store: ObjectStore, document: dict) -> str:
    """The log's published checkpoint, with its cosignatures, when it is the one the
    proof holds against; else the committed note the proof carries."""
    key_id = document["attestation"]["signature"]["key_id"]
    try:
        published = store.get_bytes(layout.published_checkpoint(key_id)).decode("utf-8")
    except (StorageError, UnicodeDecodeError):
        return document["checkpoint"]
    same = published.partition("\n\n")[0] == document["checkpoint"].partition("\n\n")[0]
    return published if same else document["checkpoint"]


def check_tlog_proof_files(paths: Collection[str], policy: Policy, as_json: bool) -> ExitStatus:
    """``verify --proof --policy``: check each tlog-proof file offline, one line each."""
    rejected = 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_PROOF_BYTES + 1)
            checkpoint, attestation, cosigned = check_tlog_proof(raw.decode("utf-8", "replace"), policy)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        except Rejected as exc:
            rejected += 1
            record: dict[str, object] = {"source": path, "status": Status.REJECTED, "reason": exc.reason}
            record.update(path=exc.path, detail=exc.detail)
            line = f"REJECTED    proof  {path}  {exc.reason} at {exc.path or '<document>'}: {exc.detail}"
        else:
            record = {"source": path, "status": Status.VERIFIED, "origin": checkpoint.origin}
            record.update(tree_size=checkpoint.size, cosigned=sorted(cosigned))
            line = (
                f"VERIFIED    proof  {path}  {attestation['subject_pith_number']} in {checkpoint.origin} "
                f"at size {checkpoint.size}, cosigned by {', '.join(sorted(cosigned)) or 'no witness'}"
            )
        echo(json.dumps(record, ensure_ascii=False) if as_json else line)
    echo(f"{len(paths) - rejected} verified, {rejected} rejected", err=as_json)
    return ExitStatus.REJECTED if rejected else ExitStatus.OK


def check_proof_files(paths: Collection[str], keyring: Keyring, as_json: bool) -> ExitStatus:
    """``verify --proof``: check each proof file offline, one line each, then a summary;
    returns the exit status."""
    rejected = 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                checkpoint = check_proof(parse(handle.read(PROOF_LIMITS.max_bytes + 1), PROOF_LIMITS).data, keyring)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        except Rejected as exc:
            rejected += 1
            record: dict[str, object] = {
                "source": path,
                "status": Status.REJECTED,
                "reason": exc.reason,
                "path": exc.path,
                "detail": exc.detail,
            }
            line = f"REJECTED    proof  {path}  {exc.reason} at {exc.path or '<document>'}: {exc.detail}"
        else:
            record = {
                "source": path,
                "status": Status.VERIFIED,
                "origin": checkpoint.origin,
                "tree_size": checkpoint.size,
            }
            line = f"VERIFIED    proof  {path}  in {checkpoint.origin} at size {checkpoint.size}"
        echo(json.dumps(record, ensure_ascii=False) if as_json else line)
    echo(f"{len(paths) - rejected} verified, {rejected} rejected", err=as_json)
    return ExitStatus.REJECTED if rejected else ExitStatus.OK
