"""Witness policies in the Sigsum/C2SP policy file format, with signed-note vkeys:
which logs to trust, which witnesses, and how many of them must cosign.

One statement a line (``#`` starts a comment)::

    log VKEY [URL]
    witness NAME VKEY URL
    group NAME k|any|all MEMBER...
    quorum NAME

A group is met when ``k`` of its members are (``any``: one, ``all``: every one);
a member is a witness (met when it cosigned) or a group defined above it. ``quorum``
names the witness or group that must be met (``quorum none``: no cosignature needed).

A policy counts keys, not names: the cosignature/v1 message does not name its signer,
so a key listed under two names would be one witness counted twice, and a policy that
does so is refused (as is a log listed twice). ``cosign`` and ``verify --proof`` judge
a note's cosignatures with the same two calls, ``cosigned`` and ``met``.
"""

from dataclasses import dataclass, field

from .checkpoint import uint64
from .signed_note import COSIGNATURE_KEY, NOTE_KEY, NoteKeyError, SignedNote, VerifierKey, parse_vkey, verifies

MAX_POLICY_BYTES = 1 << 16


class PolicyError(ValueError):
    """A policy file that does not parse: the message names the line."""


@dataclass(frozen=True)
class PolicyWitness:
    name: str
    key: VerifierKey
    url: str


@dataclass
class Policy:
    logs: dict[str, tuple[VerifierKey, str]] = field(default_factory=dict)  # origin -> (vkey, URL or '')
    witnesses: dict[str, PolicyWitness] = field(default_factory=dict)
    groups: dict[str, tuple[int, list[str]]] = field(default_factory=dict)  # name -> (threshold, members)
    quorum: str = "none"

    def met(self, cosigned: set[str], name: str | None = None) -> bool:
        """Is the quorum (or the group or witness ``name``) met by the witnesses that cosigned?"""
        name = self.quorum if name is None else name
        if name == "none":
            return True
        if name in self.witnesses:
            return name in cosigned
        threshold, members = self.groups[name]
        return sum(self.met(cosigned, member) for member in members) >= threshold

    def cosigned(self, note: SignedNote) -> set[str]:
        """The witnesses whose cosignature of the note's text it carries; Rejected when
        a line of one of them does not verify or repeats."""
        return {name for name, witness in self.witnesses.items() if verifies(note, witness.key)}


def parse_policy(text: str) -> Policy:
    policy, quorum = Policy(), None
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.partition("#")[0].split()
        if not words:
            continue
        try:
            quorum = _statement(policy, words, quorum)
        except (NoteKeyError, PolicyError) as exc:
            raise PolicyError(f"line {number}: {exc}") from None
    if quorum is None:
        raise PolicyError("no quorum line")
    policy.quorum = quorum
    return policy


def _statement(policy: Policy, words: list[str], quorum: str | None) -> str | None:
    keyword, args = words[0], words[1:]
    defined = {"none", *policy.witnesses, *policy.groups}
    if keyword == "log" and len(args) in (1, 2):
        key = _key(args[0], NOTE_KEY)
        if key.name in policy.logs:
            raise PolicyError(f"the log {key.name} is listed twice")
        policy.logs[key.name] = (key, args[1] if len(args) == 2 else "")
    elif keyword == "witness" and len(args) == 3:
        if args[0] in defined:
            raise PolicyError(f"{args[0]} is defined twice")
        key = _key(args[1], COSIGNATURE_KEY)
        twin = next((name for name, other in policy.witnesses.items() if other.key.public_raw == key.public_raw), None)
        if twin is not None:
            raise PolicyError(f"witness {args[0]} has the key of {twin}: one key is one witness, name it once")
        policy.witnesses[args[0]] = PolicyWitness(args[0], key, args[2].rstrip("/"))
    elif keyword == "group" and len(args) >= 3:
        name, threshold, members = args[0], args[1], args[2:]
        if name in defined:
            raise PolicyError(f"{name} is defined twice")
        unknown = [member for member in members if member not in defined or member == "none"]
        if unknown or len(set(members)) != len(members):
            raise PolicyError(f"group {name}: members must be distinct witnesses or groups defined above it")
        count = {"any": 1, "all": len(members)}.get(threshold) or uint64(threshold) or 0
        if not 1 <= count <= len(members):
            raise PolicyError(f"group {name}: threshold {threshold!r} is not any, all or 1 to {len(members)}")
        policy.groups[name] = (count, members)
    elif keyword == "quorum" and len(args) == 1:
        if quorum is not None or args[0] not in defined:
            raise PolicyError("one quorum line, naming a witness or group defined above it, or none")
        return args[0]
    else:
        raise PolicyError(f"not a policy statement: {' '.join(words)[:80]!r}")
    return quorum


def _key(text: str, kind: int) -> VerifierKey:
    key = parse_vkey(text)
    if key.kind != kind:
        raise PolicyError(f"{key.name}: a {'log' if kind == NOTE_KEY else 'witness'} needs a vkey of type {kind}")
    return key
