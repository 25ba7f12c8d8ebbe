"""Programs the benchmarks run beside ours (nginx, wget), installed from the
distribution's packages with apt when missing (as root, or through sudo)."""

import os
import shutil
import subprocess
from pathlib import Path


def find(binary: str) -> str | None:
    """The program's path: on PATH, or in /usr/sbin (nginx's home, off a user's PATH)."""
    return shutil.which(binary) or next((str(p) for p in [Path("/usr/sbin") / binary] if p.is_file()), None)


def ensure(binary: str, package: str) -> str:
    """The program's path, installing ``package`` first when the program is missing."""
    found = find(binary)
    if found:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", package], check=True, env=env)
    found = find(binary)
    if not found:
        raise SystemExit(f"{binary}: not found after installing {package}")
    return found
