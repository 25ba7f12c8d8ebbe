"""``pith-archiver cosign``: the archive's logs cosigned by the witnesses of a policy
(C2SP tlog-witness), their cosignatures published in each log's checkpoint."""

import click

from pith.checkpoint import open_checkpoint
from pith.policy import MAX_POLICY_BYTES, Policy, PolicyError, parse_policy
from pith.reasons import Rejected
from storage.key_logs import LogBroken, key_logs
from storage.log_proofs import current_log
from storage.manifest import read_committed
from storage.stores import StorageError
from storage.transparency.cosign import cosign_log

from .archive_reading import TRUST_HELP, Trust, open_archive, trust_options
from .exit_status import ConfigError, ExitStatus, RunFailed
from .output import log_to_stderr, verbosity_options


def read_policy(path: str) -> Policy:
    """A policy file, or a one-line usage error."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_POLICY_BYTES + 1)
        if len(text) > MAX_POLICY_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_POLICY_BYTES} bytes")
        return parse_policy(text.decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (PolicyError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


@click.command(epilog=TRUST_HELP)
@click.argument("archive")
@click.option(
    "--policy",
    "policy_file",
    required=True,
    help="Witness policy: 'log VKEY [URL]', 'witness NAME VKEY URL', 'group NAME k|any|all MEMBER...', "
    "'quorum NAME' lines (docs/TRANSPARENCY.md).",
)
@trust_options
@verbosity_options
def cosign(archive: str, policy_file: str, trust: Trust, verbosity: int) -> None:
    """Send the newest checkpoint of each log of ARCHIVE that the policy lists to the
    policy's witnesses, and publish it with their cosignatures once the quorum is met.
    Exit 0 when every log's quorum is met; 1 when one is not, or a witness has seen a
    larger log (a rollback) or one this log does not extend (a fork)."""
    log_to_stderr(verbosity)
    policy = read_policy(policy_file)
    store, keyring = open_archive(archive, trust)
    status = ExitStatus.OK
    try:
        logs = key_logs(read_committed(store, keyring).manifests)
        listed = 0
        for key_id, log in sorted(logs.items()):
            tree, note = current_log(store, keyring, log)
            if note is None:
                continue
            checkpoint, key = open_checkpoint(note, keyring)
            if checkpoint.origin not in policy.logs:
                continue
            if policy.logs[checkpoint.origin][0].public_raw != key.raw:
                raise ConfigError(f"{policy_file}: the log {checkpoint.origin} has another key than {key_id}")
            listed += 1
            outcome = cosign_log(store, key_id, note, checkpoint, tree, policy)
            for name in sorted(outcome.cosigned):
                click.echo(f"cosigned {checkpoint.origin} {checkpoint.size} {name}")
            for name, (code, why) in sorted(outcome.problems.items()):
                click.echo(f"{code} {checkpoint.origin} {name}: {why}")
            click.echo(f"{checkpoint.origin} {checkpoint.size}: quorum {'met' if outcome.met else 'not met'}")
            if not outcome.met:
                status = ExitStatus.REJECTED
    except (LogBroken, Rejected) as exc:
        click.echo(f"log_broken {archive}: {exc}")
        raise SystemExit(ExitStatus.REJECTED) from None
    except StorageError as exc:
        raise RunFailed(str(exc)) from None
    if not listed:
        raise ConfigError(f"{policy_file} lists none of the logs of {archive}")
    raise SystemExit(status)
