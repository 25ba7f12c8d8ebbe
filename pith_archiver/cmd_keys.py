"""``pith-archiver keys``: the archiver's own signing keys."""

import json
import re
from pathlib import Path

import click

from storage.signing_key import new_signer
from .exit_status import ConfigError
from .output import say, verbosity_options

KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # it names keys/<key_id>.json and a table partition


@click.group()
def keys():
    """The archiver's own Ed25519 signing keys."""


@keys.command()
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Write the private key file here (mode 0600); an existing file is never replaced.")
@click.option("--key-id", default=None, help="The key's id [default: pith-archiver-<host>-<fingerprint>].")
@verbosity_options
def generate(out: Path, key_id: str | None, verbosity: int):
    """Make a signing key for `crawl --signing-key FILE`.

    Prints its public key document (shaped like a bundle's public_keys entry, with
    "role": "archive": it may sign manifests and attestations, never registry records;
    each archive it signs publishes it as keys/<key_id>.json). Give that document to
    whoever verifies or audits the archive: `--keyring FILE` accepts it as it is.
    """
    if key_id is not None and not KEY_ID.match(key_id):
        raise click.BadParameter("1-100 of letters, digits, '.', '_' and '-', starting with a letter or digit",
                                 param_hint="--key-id")
    if out.exists():
        raise click.UsageError(f"{out} exists: a signing key is never replaced (give another --out)")
    signer = new_signer(key_id)
    try:
        signer.save(out)
    except OSError as exc:
        raise ConfigError(f"--out {out}: {exc.strerror or exc}") from None
    say(f"wrote signing key {signer.key_id} (fingerprint {signer.fingerprint}) to {out}: keep it secret, "
               "outside the archive", err=True)
    click.echo(json.dumps(signer.archive_key_document(), indent=2))
