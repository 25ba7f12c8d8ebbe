"""Witness policies and cosigning, shared by the commands that use them: reading a
policy file (``cosign``, ``witness``, ``verify --proof``, ``crawl`` and ``sync``
``--witness-policy``), and having an archive's logs cosigned by a policy's witnesses
(``cosign``, and ``crawl --witness-policy`` after the crawl)."""

from pith.checkpoint import open_checkpoint
from pith.keyring import Keyring
from pith.policy import MAX_POLICY_BYTES, Policy, PolicyError, parse_policy
from pith.reasons import Rejected
from pith.signing import Signer
from storage.archive.manifest import read_committed
from storage.archive.stores import ObjectStore, StorageError
from storage.log_proofs import current_log
from storage.transparency.cosign import cosign_log
from storage.transparency.key_logs import LogBroken, key_logs

from .exit_status import ConfigError
from .output import echo


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


def cosign_logs(
    store: ObjectStore, keyring: Keyring, policy: Policy, key_id: str | None = None
) -> tuple[list[str], bool]:
    """Have each log of the archive (of ``key_id`` only, if given) that the policy lists
    cosigned: the lines to print, and whether every quorum is met. ConfigError when
    the policy lists none; LogBroken, Rejected or StorageError from the archive."""
    logs = key_logs(read_committed(store, keyring).manifests)
    lines, met, listed = [], True, 0
    for log_key, log in sorted(logs.items()):
        if key_id not in (None, log_key):
            continue
        tree, note = current_log(store, keyring, log)
        if note is None:
            continue
        checkpoint, key = open_checkpoint(note, keyring)
        if checkpoint.origin not in policy.logs:
            continue
        if policy.logs[checkpoint.origin][0].public_raw != key.raw:
            raise ConfigError(f"the policy's log {checkpoint.origin} has another key than {log_key}")
        listed += 1
        outcome = cosign_log(store, log_key, note, checkpoint, tree, policy)
        lines += [f"cosigned {checkpoint.origin} {checkpoint.size} {name}" for name in sorted(outcome.cosigned)]
        lines += [f"{code} {checkpoint.origin} {name}: {why}" for name, (code, why) in sorted(outcome.problems.items())]
        lines.append(f"{checkpoint.origin} {checkpoint.size}: quorum {'met' if outcome.met else 'not met'}")
        met = met and outcome.met
    if not listed:
        raise ConfigError(f"the policy lists none of the logs of {store.uri}")
    return lines, met


def cosign_after_crawl(store: ObjectStore, signer: Signer, policy: Policy) -> None:
    """``--witness-policy``: the crawl key's log cosigned, its lines on stderr."""
    try:
        lines, _ = cosign_logs(store, Keyring([signer.pinned()]), policy, signer.key_id)
    except (ConfigError, LogBroken, Rejected, StorageError) as exc:
        lines = [f"cosign: {exc}"]
    echo("\n".join(lines), err=True)
