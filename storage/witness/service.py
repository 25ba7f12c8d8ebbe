"""The witness's answer to ``add-checkpoint`` (C2SP tlog-witness), in the order of the
specification's checks:

- a body that is not ``old <size>``, proof lines, a blank line and a checkpoint note
  (``pith.signed_note``: a line after its blank line that is not a signature line, or
  no blank line, is malformed), or a size past what its SQLite view holds: 400;
- a log its policy does not list: 404; no valid signature by the log's key over the
  note's exact text (a line added to a signed text included): 403;
- an old size larger than the checkpoint's: 400;
- an old size that is not the size it holds: 409 with that size (a checkpoint of the
  size it holds with another root is kept as evidence of a fork);
- a consistency proof that does not verify (or the same size with another root): 422,
  the request kept as evidence, never cosigned;
- a view it cannot read or write: 500, and nothing cosigned;
- else the view moves, and the answer is 200 with its cosignature/v1 line.
"""

import base64
import binascii
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from pith.checkpoint import parse_checkpoint, uint64
from pith.merkle import HASH_SIZE, verify_consistency
from pith.reasons import Rejected
from pith.signed_note import COSIGNATURE_KEY, VerifierKey, cosignature_line, read_note, verifies
from pith.signing import Signer

from .state import MAX_SIZE, StaleOld, WitnessState

logger = logging.getLogger(__name__)

MAX_PROOF_LINES = 63
SIZE_TYPE = "text/x.tlog.size"


@dataclass(frozen=True)
class WitnessAnswer:
    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"


class Witness:
    def __init__(
        self,
        signer: Signer,
        name: str,
        logs: dict[str, VerifierKey],
        state: WitnessState,
        clock: Callable[[], float] = time.time,
    ):
        self.signer, self.name, self.logs, self.state, self.clock = signer, name, logs, state, clock

    @property
    def vkey(self) -> VerifierKey:
        return VerifierKey(self.name, COSIGNATURE_KEY, self.signer.public_raw)

    def add_checkpoint(self, body: bytes) -> WitnessAnswer:
        try:
            return self._answer(body)
        except sqlite3.Error as exc:
            logger.error("the witness's state cannot be read or written: %s", exc)
            return WitnessAnswer(500, "the witness cannot store its view\n")

    def _answer(self, body: bytes) -> WitnessAnswer:
        try:
            old, proof, note = _request(body)
            signed = read_note(note)
            checkpoint = parse_checkpoint(signed.text)
        except (ValueError, Rejected) as exc:
            return WitnessAnswer(400, f"bad request: {exc}\n")
        if checkpoint.size > MAX_SIZE:
            return WitnessAnswer(400, f"bad request: a tree size past {MAX_SIZE}, more than this witness holds\n")
        key = self.logs.get(checkpoint.origin)
        if key is None:
            return WitnessAnswer(404, "unknown log origin\n")
        try:
            signed_by_log = verifies(signed, key)
        except Rejected:
            signed_by_log = False
        if not signed_by_log:
            return WitnessAnswer(403, "no valid signature by the log's key\n")
        if old > checkpoint.size:
            return WitnessAnswer(400, "bad request: old size is larger than the checkpoint size\n")
        held = self.state.view(checkpoint.origin)
        held_size, held_root = (held.size, held.root) if held else (0, b"")
        if old != held_size:
            if held and checkpoint.size == held.size and checkpoint.root != held.root:
                self.state.keep_evidence(checkpoint.origin, "same size, another root", body)
            return WitnessAnswer(409, f"{held_size}\n", SIZE_TYPE)
        consistent = (
            (not proof) if old == 0 else verify_consistency(old, checkpoint.size, proof, held_root, checkpoint.root)
        )
        if not consistent:
            self.state.keep_evidence(checkpoint.origin, f"not consistent with the {old} leaves held", body)
            logger.warning(
                "%s: refused a checkpoint of %d leaves that forks the log", checkpoint.origin, checkpoint.size
            )
            return WitnessAnswer(422, "the consistency proof does not verify\n")
        now = max(int(self.clock()), held.cosigned_at if held else 0)
        line = cosignature_line(self.signer.seed, self.name, signed.text, now)
        try:
            self.state.advance(checkpoint.origin, old, checkpoint.size, checkpoint.root, note + line, now)
        except StaleOld as exc:  # another request moved the log meanwhile
            return WitnessAnswer(409, f"{exc.held}\n", SIZE_TYPE)
        logger.info("%s: cosigned %d leaves", checkpoint.origin, checkpoint.size)
        return WitnessAnswer(200, line)


def _request(body: bytes) -> tuple[int, list[bytes], str]:
    """``(old size, proof hashes, checkpoint note)`` of an add-checkpoint body."""
    head, blank, note = body.decode("utf-8").partition("\n\n")
    lines = head.split("\n")
    if not blank or not lines[0].startswith("old ") or not note.endswith("\n"):
        raise ValueError("expected 'old <size>', proof lines, a blank line and a checkpoint")
    size = uint64(lines[0][4:])
    if size is None:
        raise ValueError("the old size is not a decimal below 2^64")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise ValueError(f"more than {MAX_PROOF_LINES} proof lines")
    proof = []
    for line in lines[1:]:
        try:
            node = base64.b64decode(line, validate=True)
        except binascii.Error:
            node = b""
        if len(node) != HASH_SIZE:
            raise ValueError("a proof line is not the base64 of a 32-byte hash")
        proof.append(node)
    return size, proof, note
