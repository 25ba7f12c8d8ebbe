"""``pith-archiver prove``: an inclusion proof of a record's latest storage
attestation in its archiver key's log, for anyone to check offline."""

import base64
import json

import click

from pith.canonical import canon
from pith.checkpoint import open_checkpoint
from pith.keyring import Keyring
from pith.reasons import Rejected
from pith.signed_note import read_note
from pith.tlog_proof import tlog_proof
from storage.archive import layout
from storage.archive.reader import CommittedArchive
from storage.archive.stores import ObjectStore, StorageError
from storage.log_proofs import prove_record

from ..exit_status import ConfigError
from ..output import echo, log_to_stderr, verbosity_options
from ..reading.archives import TRUST_HELP, NoProof, Trust, open_archive, reading, record_number, trust_options


@click.command(epilog=TRUST_HELP)
@click.argument("archive")
@click.argument("record")
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
    default=None,
    help="text (the default), json (as --json) or tlog-proof: a c2sp.org/tlog-proof@v1 file with the cosigned "
    "checkpoint (for `verify --proof FILE --policy FILE`).",
)
@trust_options
@verbosity_options
def prove(
    archive: str,
    record: str,
    as_json: bool,
    form: str | None,
    trust: Trust,
    verbosity: int,
) -> None:
    """Prove that the latest storage attestation of RECORD is in its archiver key's
    log in ARCHIVE: the attestation, its leaf index, and the RFC 9162 inclusion proof up
    to the key's latest signed checkpoint. Anyone holding the archiver's public key
    checks it offline in O(log n) (docs/TRANSPARENCY.md).

    RECORD is any seed a crawl takes: a full or short Pith number (pith:RLLQL635), a
    suffix, an arXiv id, a DOI or a record's URL, looked up in ARCHIVE's own tables."""
    if as_json and form not in (None, "json"):
        raise ConfigError(f"--json is --format json: give it or --format {form}, not both")
    log_to_stderr(verbosity)
    store, keyring = open_archive(archive, trust)
    with reading(archive):
        committed = CommittedArchive.read(store, keyring)
        document = prove_record(committed, record_number(committed, record))
    if as_json or form == "json":
        echo(json.dumps(document, ensure_ascii=False))
        return
    if form == "tlog-proof":
        note = published_or_committed(store, keyring, document)
        proof = [base64.b64decode(node) for node in document["inclusion_proof"]]
        echo(tlog_proof(canon(document["attestation"]), document["leaf_index"], proof, note), nl=False)
        return
    echo(f"{document['pith_number']}  attestation {document['attestation']['event_id']}")
    echo(f"leaf {document['leaf_index']} of {document['tree_size']}; inclusion proof:")
    for node in document["inclusion_proof"]:
        echo(f"  {node}")
    echo(document["checkpoint"], nl=False)


def published_or_committed(store: ObjectStore, keyring: Keyring, document: dict) -> str:
    """The log's published checkpoint, with its cosignatures, when it is the one the
    proof holds against; else the committed note the proof carries. What it embeds it
    has checked: NoProof, naming why, when the published checkpoint is not a note the
    log's key signed."""
    path = layout.published_checkpoint(document["attestation"]["signature"]["key_id"])
    try:
        published = store.get_bytes(path)
    except StorageError:
        return document["checkpoint"]
    try:
        open_checkpoint(published, keyring)
        same = read_note(published).text == read_note(document["checkpoint"]).text
    except Rejected as exc:
        raise NoProof(f"{path}: {exc}") from None
    return published.decode("utf-8") if same else document["checkpoint"]
