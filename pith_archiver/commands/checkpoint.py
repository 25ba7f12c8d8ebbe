"""``pith-archiver checkpoint``: the latest signed checkpoint of each of the archive's
transparency logs, for witnesses and third parties to keep."""

import click

from pith.checkpoint import open_checkpoint
from pith.signed_note import NOTE_KEY, VerifierKey
from storage.log_proofs import checkpoint_notes

from ..output import echo, log_to_stderr, verbosity_options
from ..reading.archives import TRUST_HELP, NoProof, Trust, open_archive, reading, trust_options


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
    by a blank line. With --vkey, one line per log: ORIGIN VKEY. Exit 4 when ARCHIVE
    holds no archive or its store fails."""
    log_to_stderr(verbosity)
    store, keyring = open_archive(archive, trust)
    with reading(archive):
        notes = checkpoint_notes(store, keyring)
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
