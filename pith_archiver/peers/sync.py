"""``pith-archiver sync PEER``: copy a peer archive through its logs
(``storage.syncing``) instead of crawling the registry, verifying on every core as
``verify --jobs`` does, and say what each of the peer's logs gave."""

from collections import Counter
from dataclasses import dataclass

from crawler.defaults import PITH_COMMIT_EVERY
from pith.keyring import ARCHIVE, Keyring
from pith.parse import DEFAULT_MAX_BYTES
from pith.policy import Policy
from storage.archive.manifest import committed_manifests
from storage.archive.stores import StorageError, StoreRefused
from storage.capture.warc import WarcPolicy, software
from storage.runtime.cores import available_cores
from storage.syncing.peers import HttpPeer, Peer, PeerUnreachable, StorePeer, open_peer, warc_recorder
from storage.syncing.sync import PeerChecks, PeerOutcome, PeerSync
from storage.writing.writer import ArchiveWriter

from ..crawl.setup import check_signing_key, check_store, signing_key_file
from ..exit_status import ConfigError, ExitStatus, JobFailed
from ..interrupts import interrupted_status
from ..keyrings import build_keyring
from ..ordered_pool import eager_map
from ..output import counted, echo, say


@dataclass(frozen=True)
class SyncOptions:
    """What ``pith-archiver sync`` was given, as click parsed it."""

    peer: str
    archive: str
    s3_endpoint_url: str | None
    s3_single_writer: bool
    keyrings: tuple[str, ...]
    no_default_keys: bool
    signing_key: str | None
    add_signing_key: bool
    commit_every: int | None
    no_warc: bool
    log_origin: str | None
    worker: str | None
    witness_policy: str | None
    verbosity: int


def sync_from_archive(options: SyncOptions) -> ExitStatus:
    """Sync the peer into ``--out``; the exit status: 0 all copied, 1 a peer's log or
    object failed a check (the rest archived), 4 the peer could not be read or publishes
    no log we pin (nothing committed)."""
    ring, peer, policy = _checked(options)
    peer_keys = Keyring(key for key in ring if key.role == ARCHIVE)
    # the checking processes start before the archive is opened: they do not carry its history
    with eager_map(PeerChecks(ring, peer_keys), available_cores()) as check_map:
        writer = _open_writer(options, peer)
        try:
            commit_every = PITH_COMMIT_EVERY if options.commit_every is None else options.commit_every
            sync = PeerSync(peer, writer, peer_keys, check_map, policy, commit_every)
            outcomes = sync.run(committed_manifests(writer.store, Keyring([writer.signer.pinned()])))
        except KeyboardInterrupt as exc:  # and SIGTERM (pith_archiver.interrupts)
            writer.abort()
            status = interrupted_status(exc)
            say(
                f"{status.name.lower()}: the run under way not committed; the same command starts the sync again",
                err=True,
            )
            return status
        except PeerUnreachable as exc:  # before anything was written: every log's checkpoint is read first
            writer.abort()
            raise JobFailed(f"peer {peer.uri}: unreachable: {exc}") from None
        except StorageError as exc:  # a write failed: an interim commit, or the run's uploads
            writer.abort()
            raise JobFailed(f"--out: {exc}") from None
        except BaseException:
            writer.abort()
            raise
    if not outcomes:
        writer.abort()
        raise JobFailed(f"peer {peer.uri}: it publishes no log of a pinned archive key")
    try:
        manifest = writer.commit(stats={"peer_reads": peer.reads}, params=sync.params())
    except StorageError as exc:
        raise JobFailed(f"--out: {exc}") from None
    for outcome in outcomes:
        say(_line(outcome))
    say(f"from {peer.uri}: {counted(peer.reads, 'file')} read; committed {manifest}")
    status = ExitStatus.OK if all(outcome.clean for outcome in outcomes) else ExitStatus.REJECTED
    echo(f"{status.name.lower()} (exit {int(status)}): {_why(outcomes)}", err=status != ExitStatus.OK)
    return status


def _checked(options: SyncOptions) -> tuple[Keyring, Peer, Policy | None]:
    """The keyring (the peer's archive keys among them), the peer and the witness
    policy: each checked, a one-line usage error before any read."""
    ring = build_keyring(options.keyrings, options.no_default_keys, s3_endpoint_url=options.s3_endpoint_url)
    if not any(key.role == ARCHIVE for key in ring):
        raise ConfigError("sync: pin the peer's archive key with --keyring (its keys/<key_id>.json)")
    try:
        peer = open_peer(options.peer, options.s3_endpoint_url)
        if isinstance(peer, StorePeer):
            peer.store.probe_reads()
    except ValueError as exc:
        raise ConfigError(f"peer {options.peer}: {exc}") from None
    except StoreRefused as exc:
        raise ConfigError(f"peer {options.peer}: {exc}") from None
    policy = None
    if options.witness_policy:
        from ..cosigning import read_policy

        policy = read_policy(options.witness_policy)
    return ring, peer, policy


def _open_writer(options: SyncOptions, peer: Peer) -> ArchiveWriter:
    """The writer of ``--out``; an HTTP peer's exchanges go into its WARC files."""
    endpoint = options.s3_endpoint_url if options.archive.startswith("s3://") else None
    signing_key_file(options.signing_key)  # before the archive's folder is made
    store = check_store(options.archive, endpoint, options.s3_single_writer)
    worker = options.worker or "sync"
    recorded = isinstance(peer, HttpPeer) and not options.no_warc
    writer = ArchiveWriter(
        store,
        check_signing_key(options.signing_key, store, options.add_signing_key),
        worker=worker,
        log_origin=options.log_origin,
        warc=WarcPolicy() if recorded else None,
        warc_info={"software": software(), "source": peer.uri, "worker": worker},
    ).open()
    if isinstance(peer, HttpPeer) and writer.warc is not None:
        peer.recorder = warc_recorder(writer.warc)
    return writer


def _line(outcome: PeerOutcome) -> str:
    log = f"{outcome.origin or outcome.key_id} (key {outcome.key_id})"
    if outcome.failed is not None:
        return f"{log}: sync failed, {outcome.failed}"
    return (
        f"{log}: entries {outcome.from_size} to {outcome.to_size}, {outcome.archived} archived new, "
        f"{outcome.held} already held, {_quarantined(outcome.quarantined)}"
        + (f", {outcome.too_large} too large (not kept)" if outcome.too_large else "")
        + f", {outcome.missing} missing at the peer"
    )


def _quarantined(reasons: Counter[str]) -> str:
    named = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
    return f"{reasons.total()} quarantined" + (f" ({named})" if named else "")


def _why(outcomes: list[PeerOutcome]) -> str:
    """The closing line's reason, as a crawl's: what was copied, then what went wrong."""
    archived, held = sum(o.archived for o in outcomes), sum(o.held for o in outcomes)
    whys = [f"{archived} archived new, {held} already held, from {counted(len(outcomes), 'log')}"]
    failed = sorted({o.failed.code for o in outcomes if o.failed is not None})
    if failed:
        whys.append(f"{counted(sum(o.failed is not None for o in outcomes), 'log')} failed ({', '.join(failed)})")
    quarantined = sum((o.quarantined for o in outcomes), Counter[str]())
    if quarantined:
        whys.append(f"{_quarantined(quarantined)}, kept in quarantine/")
    too_large = sum(o.too_large for o in outcomes)
    if too_large:
        whys.append(
            f"{counted(too_large, 'object')} larger than a bundle may be, refused unread past {DEFAULT_MAX_BYTES} bytes"
        )
    missing = sum(o.missing for o in outcomes)
    if missing:
        whys.append(f"{counted(missing, 'object')} missing at the peer, asked for again by the next sync")
    return "; ".join(whys)
