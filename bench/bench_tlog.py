"""Transparency log speed: building a key's log, inclusion and consistency proofs, ours
(pith.merkle.Tree: every perfect subtree's hash kept, O(log n) hashes a proof) against
the baseline of RFC 9162's recursive definitions applied to the entries (as the tests
write them out, tests/test_merkle.py: each proof rehashes the subtrees it names, O(n)
hashes a proof), measured in the same run.

Rounds alternate ours and the baseline; each figure is CPU time of this process (so
other work on the machine slows the wall clock, not the figure), median of the rounds.

Run from the repository root:  python bench/bench_tlog.py [--leaves 65536] [--proofs 50] [--rounds 3]
"""

import argparse
import hashlib
import random
import statistics
import time
import tracemalloc

from pith.merkle import Tree, leaf_hash, verify_consistency, verify_inclusion
from tests.test_merkle import path, subproof  # the RFC's recursive definitions, written out plainly


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def timed(work) -> tuple[float, object]:
    start = time.process_time()
    result = work()
    return time.process_time() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--leaves", type=int, default=65536)
    parser.add_argument("--proofs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.leaves
    entries = [sha(b"%d" % i) for i in range(n)]
    hashes = [leaf_hash(entry) for entry in entries]
    rng = random.Random(7)
    indices = [rng.randrange(n) for _ in range(args.proofs)]
    olds = [rng.randrange(1, n) for _ in range(args.proofs)]
    figures = {key: [] for key in ("build", "ours_incl", "base_incl", "ours_cons", "base_cons", "check")}
    for _ in range(args.rounds):
        seconds, tree = timed(lambda: Tree(hashes))
        figures["build"].append(seconds)
        root = tree.root()
        seconds, ours = timed(lambda: [tree.inclusion_proof(i) for i in indices])
        figures["ours_incl"].append(seconds / len(indices))
        seconds, base = timed(lambda: [path(i, entries) for i in indices[:5]])
        figures["base_incl"].append(seconds / 5)
        assert ours[:5] == base
        seconds, ours_c = timed(lambda: [tree.consistency_proof(m) for m in olds])
        figures["ours_cons"].append(seconds / len(olds))
        seconds, base_c = timed(lambda: [subproof(m, entries, True) for m in olds[:5]])
        figures["base_cons"].append(seconds / 5)
        assert ours_c[:5] == base_c
        seconds, ok = timed(lambda: all(verify_inclusion(hashes[i], i, n, p, root) for i, p in zip(indices, ours)))
        figures["check"].append(seconds / len(indices))
        assert ok and verify_consistency(olds[0], n, ours_c[0], tree.root(olds[0]), root)
    tracemalloc.start()
    Tree(hashes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    med = {key: statistics.median(values) for key, values in figures.items()}
    print(f"{n} leaves, {args.proofs} proofs a round, {args.rounds} rounds (medians, CPU time)")
    print(f"build the log (Tree)           {med['build']:.3f} s   ({peak / n:.0f} bytes a leaf at peak)")
    print(f"inclusion proof   ours {med['ours_incl'] * 1e6:9.1f} us   baseline {med['base_incl'] * 1e3:9.1f} ms")
    print(f"consistency proof ours {med['ours_cons'] * 1e6:9.1f} us   baseline {med['base_cons'] * 1e3:9.1f} ms")
    print(f"verify an inclusion proof      {med['check'] * 1e6:.1f} us")


if __name__ == "__main__":
    main()
