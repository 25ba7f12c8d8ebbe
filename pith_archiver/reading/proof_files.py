"""The offline check of proof files behind ``verify --proof``: what ``prove`` prints,
checked with nothing but the pinned keys (and the witness policy)."""

import json
from collections.abc import Collection

from pith.keyring import Keyring
from pith.parse import Limits, parse
from pith.policy import Policy
from pith.proof import check_proof
from pith.reasons import Rejected
from pith.tlog_proof import MAX_PROOF_BYTES, check_tlog_proof
from pith.verdict import Status

from ..exit_status import ConfigError, ExitStatus
from ..output import echo

PROOF_LIMITS = Limits(max_bytes=1 << 20)


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
