"""The minimal baseline: hashes and signatures only, written plainly with json +
hashlib + pynacl, one thread. Beside bench/plain_verify.py (every check ``verify``
makes), it is the least a verifier can do and still be one: every hash recomputed
from canonical JSON, every signature checked under the pinned key. No schema checks,
no Pith numbers, no merge, no safe parsing.

    python bench/minimal_verify.py KEYRING.json PATH...   (files or folders of *.json)
"""

import base64
import hashlib
import json
import sys
from pathlib import Path

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

UNHASHED = ("signature", "content_sha256", "event_id")


def sha(obj) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()


class MinimalVerifier:
    def __init__(self, keys: dict):
        """``keys``: key_id -> raw 32-byte public key (the pinned keyring)."""
        self.keys = {key_id: VerifyKey(raw) for key_id, raw in keys.items()}

    def signed(self, sig: dict, digest_hex: str) -> bool:
        key = self.keys.get(sig["key_id"])
        if key is None:
            return False
        try:
            key.verify(bytes.fromhex(digest_hex), base64.b64decode(sig["signature_b64"]))
        except BadSignatureError:
            return False
        return True

    def verify(self, raw: bytes) -> bool:
        try:
            bundle = json.loads(raw)
        except ValueError:
            return False
        canonical = bundle["canonical_sha256"]
        if sha(bundle["canonical_record"]) != canonical:
            return False
        created = next(e for e in bundle["events"] if e["event_type"] == "record_created")
        if not self.signed(created["payload"]["receipt"], canonical):
            return False
        for event in bundle["events"]:
            content = {k: v for k, v in event.items() if k not in UNHASHED}
            if sha(content) != event["content_sha256"] or not self.signed(event["signature"], event["content_sha256"]):
                return False
        state = {k: v for k, v in bundle["state"].items() if k != "state_sha256"}
        if sha(state) != bundle["state"]["state_sha256"]:
            return False
        signature = bundle["bundle_signature"]
        body = {k: v for k, v in bundle.items() if k != "bundle_signature"}
        return sha(body) == signature["bundle_sha256"] and self.signed(signature, signature["bundle_sha256"])


def bundle_files(paths):
    for path in map(Path, paths):
        yield from sorted(path.rglob("*.bundle.json")) if path.is_dir() else [path]


def main(argv) -> int:
    keyring, *paths = argv
    keys = {k["key_id"]: base64.b64decode(k["public_key_b64"]) for k in json.loads(Path(keyring).read_text())["keys"]}
    verifier = MinimalVerifier(keys)
    verified = rejected = 0
    for path in bundle_files(paths):
        if verifier.verify(path.read_bytes()):
            verified += 1
        else:
            rejected += 1
            print(f"REJECTED {path}")
    print(f"{verified} verified, {rejected} rejected")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
