"""What a validity window on the pinned registry key costs verification.

    python bench/bench_key_windows.py [--rounds 5] [--repeat 600]

Verifies the real bundles with the built-in registry key as it is (no window), then
pinned with a window (not_before and not_after), alternated, and prints the median
microseconds per bundle of each. Both keep every signature check; the window adds one
timestamp comparison per signature.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pith.keyring import REGISTRY_KEY, Keyring, key_from_entry  # noqa: E402
from pith.shipped import FIXTURES  # noqa: E402
from pith.verify import verify_bundle  # noqa: E402

WINDOW = {"not_before": "2026-01-01T00:00:00Z", "not_after": "2027-01-01T00:00:00Z"}


def per_bundle_us(raws: list[bytes], keyring: Keyring, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        for raw in raws:
            if not verify_bundle(raw, keyring).ok:
                raise SystemExit("a real bundle did not verify")
    return (time.perf_counter() - started) / (repeat * len(raws)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=600)
    options = parser.parse_args()
    raws = [path.read_bytes() for path in sorted(FIXTURES.glob("*.bundle.json"))]
    rings = {"no window": Keyring.default(), "window": Keyring([key_from_entry({**REGISTRY_KEY, **WINDOW})])}
    timings = {name: [] for name in rings}
    for _ in range(options.rounds):
        for name, ring in rings.items():
            timings[name].append(per_bundle_us(raws, ring, options.repeat))
    base = statistics.median(timings["no window"])
    for name, values in timings.items():
        print(f"{name:>10}: {statistics.median(values):8.1f} us per bundle ({statistics.median(values) / base:.3f}x)")


if __name__ == "__main__":
    main()
