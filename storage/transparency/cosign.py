"""Getting a key's newest checkpoint cosigned by the witnesses of a policy
(``pith.policy``) and publishing it with their cosignatures once the quorum is met.

Each witness is first sent ``old`` = the size it cosigned last, as far as the
published checkpoint shows, else 0; a 409 answer gives the size the witness holds,
and the call is retried once from there with the consistency proof from that size. A
witness holding a larger log (a rollback of the archive) or one this log does not
extend (a fork) is named with its size, and nothing is published. Whether the quorum
is met is judged on the note that would be published, by the code ``verify --proof``
judges it with (``Policy.cosigned``, ``Policy.met``).
"""

import logging
from dataclasses import dataclass, field

from pith.checkpoint import Checkpoint, parse_checkpoint, uint64
from pith.merkle import Tree
from pith.policy import Policy, PolicyWitness
from pith.reasons import Finding, Rejected
from pith.signed_note import SignedNote, read_note, verifies
from storage.archive import layout
from storage.archive.stores import ObjectStore, StorageError
from storage.transparency.tiles import publish
from storage.transparency.witness_client import DEADLINE, WitnessUnreachable, add_checkpoint_body, post_add_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class LogCosigning:
    """What the witnesses said of one log's checkpoint."""

    origin: str
    size: int
    cosigned: dict[str, str] = field(default_factory=dict)  # witness -> its cosignature line
    problems: dict[str, tuple[Finding, str]] = field(default_factory=dict)  # witness -> (code, why)
    met: bool = False


def cosign_log(
    store: ObjectStore,
    key_id: str,
    note: str,
    checkpoint: Checkpoint,
    tree: Tree,
    policy: Policy,
    deadline: float = DEADLINE,
) -> LogCosigning:
    """Ask every witness of the policy to cosign ``note`` (of the key's log ``tree``),
    each call within ``deadline`` seconds; publish it with their cosignatures when the
    quorum is met."""
    outcome = LogCosigning(checkpoint.origin, checkpoint.size)
    seen = _last_cosigned(store, key_id, policy)
    for witness in policy.witnesses.values():
        try:
            line = _ask(witness, note, checkpoint, tree, seen.get(witness.name, 0), deadline)
        except _Problem as problem:
            outcome.problems[witness.name] = (problem.code, str(problem))
            logger.warning("%s: %s %s", checkpoint.origin, problem.code, problem)
            continue
        outcome.cosigned[witness.name] = line
    cosigned = note + "".join(outcome.cosigned[name] for name in sorted(outcome.cosigned))
    outcome.met = policy.met(policy.cosigned(read_note(cosigned))) and not any(
        code in (Finding.LOG_ROLLED_BACK, Finding.LOG_FORKED) for code, _ in outcome.problems.values()
    )
    # publish, unless a commit published a newer checkpoint meanwhile
    if outcome.met and _published(store, key_id)[0] <= checkpoint.size:
        publish(store, key_id, cosigned)
    return outcome


class _Problem(Exception):
    def __init__(self, code: Finding, why: str):
        super().__init__(why)
        self.code = code


def _ask(witness: PolicyWitness, note: str, checkpoint: Checkpoint, tree: Tree, old: int, deadline: float) -> str:
    """The witness's cosignature line of the checkpoint; _Problem when it gives none."""
    for _ in range(2):
        old = min(old, checkpoint.size)
        body = add_checkpoint_body(old, tree.consistency_proof(old, checkpoint.size), note)
        try:
            answer = post_add_checkpoint(witness.url, body, deadline)
        except WitnessUnreachable as exc:
            raise _Problem(Finding.WITNESS_UNREACHABLE, str(exc)) from None
        if answer.status == 200:
            line = _cosignature(witness, note, answer.body)
            if line is None:
                raise _Problem(Finding.WITNESS_REFUSED, f"{witness.name} answered 200 without a valid cosignature")
            return line
        held = _size_of(answer.body) if answer.status == 409 else None
        if held is not None and held > checkpoint.size:
            raise _Problem(
                Finding.LOG_ROLLED_BACK,
                f"{witness.name} has seen {held} leaves of {checkpoint.origin}, "
                f"the archive's log has {checkpoint.size}",
            )
        if answer.status == 422:
            raise _Problem(
                Finding.LOG_FORKED,
                f"{witness.name} holds a checkpoint of {old} leaves that the log of {checkpoint.size} does not extend",
            )
        if held is None or held == old:
            raise _Problem(Finding.WITNESS_REFUSED, f"{witness.name} answered {answer.status}: {answer.body[:200]!r}")
        old = held
    raise _Problem(Finding.WITNESS_REFUSED, f"{witness.name} keeps answering 409")


def _cosignature(witness: PolicyWitness, note: str, body: bytes) -> str | None:
    """The line of the witness's answer that cosigns the note, read with the note as
    the published note will be."""
    for line in body.decode("utf-8", "replace").splitlines():
        try:
            if verifies(read_note(f"{note}{line}\n"), witness.key):
                return line + "\n"
        except Rejected:
            continue
    return None


def _size_of(body: bytes) -> int | None:
    return uint64(body.decode("ascii", "replace").strip())


def _published(store: ObjectStore, key_id: str) -> tuple[int, SignedNote | None]:
    """The size and note of the key's published checkpoint ((0, None) when there is
    none, or it does not read)."""
    try:
        published = read_note(store.get_bytes(layout.published_checkpoint(key_id)))
        return parse_checkpoint(published.text).size, published
    except (StorageError, Rejected):
        return 0, None


def _last_cosigned(store: ObjectStore, key_id: str, policy: Policy) -> dict[str, int]:
    """Witness -> the size of the published checkpoint, for those whose cosignature it carries."""
    size, published = _published(store, key_id)
    if published is None:
        return {}
    return {name: size for name, witness in policy.witnesses.items() if published.lines_of(witness.key)}
