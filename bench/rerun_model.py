"""The model-based test of scheduled re-crawls (tests/test_rerun_model.py) in its long
profile: many simulated weeks of lying listings, clock jumps and changes, each week a
real crawl against nginx, and of peers that grow, roll back and squat an origin, each
week a real sync. Prints what the weeks did (runs, honest weeks and their requests
against the budget, lies acted on, clock jumps, the longest a change waited; syncs,
rollbacks, refusals) and the time taken; exits with pytest's status.

    .venv/bin/python bench/rerun_model.py            # the long profile
    .venv/bin/python bench/rerun_model.py -k weeks   # one machine of the two (weeks, peers)
    .venv/bin/python bench/rerun_model.py --profile ci
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="long", choices=("ci", "long"))
    parser.add_argument("-k", dest="only", default="", help="run only the machine named (weeks or peers)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PITH_MODEL_PROFILE": args.profile, "PITH_MODEL_REPORT": folder}
        started = time.monotonic()
        test = "tests/test_rerun_model.py"
        only = ["-k", args.only] if args.only else []
        status = subprocess.call([sys.executable, "-m", "pytest", "-q", test, *only], cwd=ROOT, env=env)
        elapsed = time.monotonic() - started
        tallies = {path.stem: json.loads(path.read_text()) for path in sorted(Path(folder).glob("*.json"))}
        failures = Path(folder, "failures.log")
        if failures.exists():
            print(failures.read_text())
    print(f"profile {args.profile}: {elapsed:.0f} s, exit {status}")
    for machine, tally in tallies.items():
        print(f"{machine}: " + ", ".join(f"{key} {value}" for key, value in sorted(tally.items())))
    return status


if __name__ == "__main__":
    sys.exit(main())
