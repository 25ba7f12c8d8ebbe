"""``pith-archiver cosign``: the archive's logs cosigned by the witnesses of a policy
(C2SP tlog-witness), their cosignatures published in each log's checkpoint."""

import click

from pith.reasons import Rejected
from storage.archive.stores import StorageError
from storage.transparency.key_logs import LogBroken

from ..cosigning import cosign_logs, read_policy
from ..exit_status import ExitStatus, JobFailed
from ..output import echo, log_to_stderr, verbosity_options
from ..reading.archives import TRUST_HELP, Trust, open_archive, trust_options


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
    try:
        lines, met = cosign_logs(store, keyring, policy)
    except (LogBroken, Rejected) as exc:
        echo(f"log_broken {archive}: {exc}")
        raise SystemExit(ExitStatus.REJECTED) from None
    except StorageError as exc:
        raise JobFailed(str(exc)) from None
    echo("\n".join(lines))
    raise SystemExit(ExitStatus.OK if met else ExitStatus.REJECTED)
