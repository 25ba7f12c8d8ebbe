"""The baseline: the same checks written plainly with json + hashlib + pynacl.

It is what a careful reader of PITH-FORMAT.md would write first: json.loads with a
duplicate-key hook, json.dumps for every canonical form, a VerifyKey per pinned key.
It exists only so bench_verify.py can compare against it in the same run.
"""

import base64
import hashlib
import json

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey


def canon(x) -> bytes:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha(x) -> str:
    return hashlib.sha256(canon(x)).hexdigest()


def _pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


class PlainVerifier:
    def __init__(self, keys: dict):
        """``keys``: key_id -> raw 32-byte public key (the pinned keyring)."""
        self.keys = {kid: VerifyKey(raw) for kid, raw in keys.items()}
        self.fingerprints = {kid: hashlib.sha256(raw).hexdigest()[:32] for kid, raw in keys.items()}

    def _sig(self, sig, digest_hex):
        kid = sig["key_id"]
        if kid not in self.keys or sig["public_key_fingerprint"] != self.fingerprints[kid]:
            return False
        try:
            self.keys[kid].verify(bytes.fromhex(digest_hex), base64.b64decode(sig["signature_b64"]))
        except BadSignatureError:
            return False
        return True

    def verify(self, raw: bytes) -> str | None:
        """None when the bundle verifies, else the name of the first failed check."""
        try:
            b = json.loads(raw.decode("utf-8"), object_pairs_hook=_pairs)
        except ValueError:
            return "malformed_json"
        record, canonical = b["canonical_record"], b["canonical_sha256"]
        if sha(record) != canonical:
            return "canonical_hash_mismatch"
        suffix = base64.b32encode(bytes.fromhex(canonical)).decode()[:26]
        if b["pith_number"] != f"pith:{record['metadata']['submitted_at'][:4]}:{suffix}":
            return "pith_number_mismatch"
        if b["short_pith_number"] != "pith:" + suffix[:8]:
            return "pith_number_mismatch"
        for alias in b["source_aliases"]:
            if alias["alias_kind"].startswith("pith_short_"):
                if alias["alias_value"] != suffix[: int(alias["alias_kind"][11:])]:
                    return "pith_number_mismatch"
        for key in b["public_keys"]:
            raw_key = base64.b64decode(key["public_key_b64"])
            digest = hashlib.sha256(raw_key)
            if key["public_key_hex"] != raw_key.hex() or key["fingerprint_sha256_hex"] != digest.hexdigest()[:32]:
                return "key_fingerprint_mismatch"
            if key["fingerprint_sha256_b32_first128bits"] != base64.b32encode(digest.digest()).decode()[:26]:
                return "key_fingerprint_mismatch"
        created = [e for e in b["events"] if e["event_type"] == "record_created"][0]
        if created["payload"]["canonical_record"] != record or b["state"]["current"]["canonical_record"] != record:
            return "record_mismatch"
        if not self._sig(created["payload"]["receipt"], canonical):
            return "receipt_signature_invalid"
        for e in b["events"]:
            content = {k: v for k, v in e.items() if k not in ("signature", "content_sha256", "event_id")}
            if sha(content) != e["content_sha256"]:
                return "event_hash_mismatch"
            if e["event_id"] != "sha256:" + e["content_sha256"]:
                return "event_id_mismatch"
            if e["subject_pith_number"] != b["pith_number"]:
                return "subject_mismatch"
            if not self._sig(e["signature"], e["content_sha256"]):
                return "event_signature_invalid"
        state = {k: v for k, v in b["state"].items() if k != "state_sha256"}
        if sha(state) != b["state"]["state_sha256"]:
            return "state_hash_mismatch"
        if canon(self._merge(b)) != canon(state):
            return "state_mismatch"
        body = {k: v for k, v in b.items() if k != "bundle_signature"}
        if sha(body) != b["bundle_signature"]["bundle_sha256"]:
            return "bundle_hash_mismatch"
        if not self._sig(b["bundle_signature"], b["bundle_signature"]["bundle_sha256"]):
            return "bundle_signature_invalid"
        return None

    @staticmethod
    def _merge(b):
        lists = [
            "graph_snapshots",
            "author_attestations",
            "timestamp_anchors",
            "storage_attestations",
            "citation_signatures",
            "replication_records",
            "corrections",
            "mirror_hints",
        ]
        current = {"canonical_record": None, "source_aliases": b["source_aliases"], **{n: [] for n in lists}}
        for e in b["events"]:
            entry = {k: e[k] for k in ("event_id", "target", "created_at", "signer", "payload")}
            if e["event_type"] == "record_created":
                current["record_created"] = entry
                current["canonical_record"] = e["payload"]["canonical_record"]
            else:
                current[e["event_type"] + "s"].append(entry)
        n = len(b["events"])
        return {
            "state_type": "pith_open_graph_state",
            "state_version": "1.0",
            "pith_number": b["pith_number"],
            "merge_version": b["merge_version"],
            "event_count": n,
            "valid_event_count": n,
            "invalid_event_count": 0,
            "equivocation_count": 0,
            "current": current,
            "equivocations": [],
            "invalid_events": [],
            "applied_event_ids": [e["event_id"] for e in b["events"]],
        }


def main(argv) -> int:
    """Whole-process use, as bench/bench_verify_cli.py times it: KEYRING.json PATH..."""
    from minimal_verify import bundle_files

    keyring, *paths = argv
    keys = {k["key_id"]: base64.b64decode(k["public_key_b64"]) for k in json.loads(open(keyring).read())["keys"]}
    verifier = PlainVerifier(keys)
    failed = [path for path in bundle_files(paths) if verifier.verify(path.read_bytes()) is not None]
    print("\n".join(f"REJECTED {path}" for path in failed) or "all verified")
    return 1 if failed else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
