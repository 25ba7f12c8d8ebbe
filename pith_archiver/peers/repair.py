"""``audit ARCHIVE --repair-from PEER``: what the audit found missing or damaged,
repaired from peers (``storage.repair``), then the archive audited again. Checked
before the audit starts: the peers (a folder, ``http(s)://`` or ``s3://``) and the
archive's signing key, which signs the repairs."""

import json
from collections import Counter
from dataclasses import dataclass

from pith.keyring import ARCHIVE, Keyring
from pith.reasons import Finding
from pith.signing import Signer
from storage.audit import AuditCounts
from storage.repair import RepairReport
from storage.syncing.peers import Peer, open_peer

from ..exit_status import ConfigError, ExitStatus
from ..keyrings import machine_key
from ..output import counted, echo, say
from ..reading.archives import Trust, pinned_keyring

# what a repair mends: an object (from a peer's copy, or rebuilt), and what checking its bytes found;
# a stale published checkpoint
REPAIRABLE = {
    Finding.MISSING,
    Finding.SIZE_MISMATCH,
    Finding.HASH_MISMATCH,
    Finding.BUNDLE_REJECTED,
    Finding.WARC_INVALID,
    Finding.ROWS_MISMATCH,
    Finding.CHECKPOINT_UNPUBLISHED,
}


@dataclass(frozen=True)
class RepairSetup:
    peers: list[Peer]
    signer: Signer
    peer_keys: Keyring  # the archive keys pinned: each peer's log must be signed by one


def repair_setup(sources: tuple[str, ...], trust: Trust) -> RepairSetup:
    """The peers, the archive's key and the pinned archive keys; a usage error (exit
    2) before any read when one is unusable."""
    own = machine_key(trust.signing_key)
    if own is None:
        raise ConfigError("--repair-from signs each repair with the archive's key: give --signing-key FILE")
    try:
        signer = Signer.load(own)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--signing-key {own}: not a usable signing key ({exc})") from None
    peers = []
    for source in sources:
        try:
            peers.append(open_peer(source, trust.s3_endpoint_url if source.startswith("s3://") else None))
        except ValueError as exc:
            raise ConfigError(f"--repair-from {source}: {exc}") from None
    peer_keys = Keyring(key for key in pinned_keyring(trust) if key.role == ARCHIVE)
    return RepairSetup(peers, signer, peer_keys)


def show_repair(report: RepairReport, as_json: bool) -> None:
    """One line a peer not used, an object repaired or not, a copy refused; then the
    totals (``as_json``: one JSON object each, as ``--json`` prints discrepancies)."""
    if as_json:
        for state in report.peers:
            if state.refused:
                echo(json.dumps({"peer_not_used": state.peer.uri, "why": state.refused}))
        for refusal in report.refusals:
            echo(json.dumps({"refused": refusal}))
        for repaired in report.repaired:
            done = {"damage": repaired.damage, "peer": repaired.peer, "damaged_copy": repaired.damaged_copy}
            echo(json.dumps({"repaired": repaired.entry.path, **done}))
        for left in report.not_repaired:
            echo(json.dumps({"not_repaired": left.entry.path, "damage": left.damage, "why": left.why}))
        echo(json.dumps({"repair": {"repaired": len(report.repaired), "reads": report.reads}}))
        return
    for state in report.peers:
        if state.refused:
            echo(f"peer {state.peer.uri} not used: {state.refused}", err=True)
    for refusal in report.refusals:
        echo(f"refused {refusal}", err=True)
    for repaired in report.repaired:
        moved = f"; the damaged copy moved to {repaired.damaged_copy}" if repaired.damaged_copy else ""
        say(f"repaired {repaired.entry.path} ({repaired.damage}) from {repaired.peer}{moved}")
    for left in report.not_repaired:
        echo(f"not repaired {left.entry.path} ({left.damage}): {left.why}", err=True)
    committed = f"; committed {report.manifest}" if report.manifest else ""
    damaged = counted(len(report.repaired) + len(report.not_repaired), "damaged object")
    say(
        f"repair: {len(report.repaired)} of {damaged} repaired, "
        f"{counted(report.reads, 'file')} read from {counted(len(report.peers), 'peer')}{committed}"
    )


def repair_status(report: RepairReport | None, counts: AuditCounts) -> tuple[ExitStatus, str]:
    """The exit status of an audit asked to repair, and why: 4 when damage was found and
    no peer could be read, 0 when the archive (then) audits clean, else 1, naming what
    no peer can repair (a manifest, say: it is signed only here)."""
    repaired = f"{len(report.repaired) if report else 0} repaired"
    if report is not None and report.not_repaired and not report.reached:
        return ExitStatus.FAILED, f"{repaired}; no peer could be read, {len(report.not_repaired)} left damaged"
    if counts.clean:
        return ExitStatus.OK, f"{repaired}; the archive audits clean"
    whys = [repaired]
    if report is not None and report.not_repaired:
        whys.append(f"{counted(len(report.not_repaired), 'object')} left damaged (named above)")
    other = {code: n for code, n in counts.discrepancies.items() if code not in REPAIRABLE}
    if other:
        named = ", ".join(f"{code} {n}" for code, n in sorted(other.items()))
        whys.append(f"{named} not repairable from a peer (named above)")
    return ExitStatus.REJECTED, "; ".join(whys) + "; the archive does not audit clean"


def repair_history(repairs: list[dict]) -> list[str]:
    """One line per repair run of the archive's history: when, how many, from where, what damage."""
    runs: dict[str, list[dict]] = {}
    for event in repairs:
        runs.setdefault(event["payload"]["run_id"], []).append(event)
    lines = []
    for run_id, events in sorted(runs.items()):
        damage = Counter(event["payload"]["damage"] for event in events)
        peers = ", ".join(sorted({event["payload"]["peer"] for event in events}))
        named = ", ".join(f"{code} {n}" for code, n in sorted(damage.items()))
        last = max(event["created_at"] for event in events)
        lines.append(f"repaired by {run_id}: {counted(len(events), 'object')} ({named}) from {peers}, the last {last}")
    return lines
