"""``pith-archiver witness``: a C2SP tlog-witness for the logs a policy lists, so that
archives witness one another (``witness``)."""

import sqlite3

import click

from pith.signing import Signer
from storage.serving.runner import serve_until_signalled
from storage.witness.server import WitnessServer
from storage.witness.service import Witness
from storage.witness.state import WitnessState

from ..cosigning import read_policy
from ..exit_status import ConfigError
from ..option_checks import RenamedFrom
from ..output import echo, log_to_stderr, verbosity_options


@click.command()
@click.option(
    "--signing-key",
    "key_file",
    cls=RenamedFrom,
    old="--key",  # until the next release: --key names a key id in `checkpoint`
    required=True,
    metavar="FILE",
    help="The witness's signing key file (as `keys generate` writes it).",
)
@click.option(
    "--policy",
    "policy_file",
    required=True,
    help="The logs to witness: the policy's 'log VKEY' lines (docs/TRANSPARENCY.md).",
)
@click.option("--name", help="The witness's cosigner name, e.g. witness.example.org/w1 [default: the key id].")
@click.option(
    "--state",
    "state_file",
    default="witness.sqlite",
    show_default=True,
    help="Its view of each log, and the evidence it keeps (SQLite).",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=7380, show_default=True)
@verbosity_options
def witness(
    key_file: str, policy_file: str, name: str | None, state_file: str, host: str, port: int, verbosity: int
) -> None:
    """Cosign the checkpoints of the logs the policy lists, each only once a
    consistency proof shows that the log grew from the checkpoint it holds (C2SP
    tlog-witness: POST /add-checkpoint). Prints its verifier key and URL, then serves
    until SIGINT or SIGTERM."""
    log_to_stderr(verbosity)
    try:
        signer = Signer.load(key_file)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot read the key {key_file}: {exc}") from None
    policy = read_policy(policy_file)
    if not policy.logs:
        raise ConfigError(f"{policy_file} lists no log to witness")
    try:
        state = WitnessState(state_file)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open {state_file}: {exc}") from None
    logs = {origin: key for origin, (key, _) in policy.logs.items()}
    server = WitnessServer(Witness(signer, name or signer.key_id, logs, state), host, port)
    try:
        serve_until_signalled(server, lambda url: echo(f"witness {server.witness.vkey} {url}"))
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    finally:
        state.close()
