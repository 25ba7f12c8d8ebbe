"""nginx serving folders as plain files on loopback: the fast static server the crawl
benchmarks compare against (``python -m http.server`` is slow enough to bound a bare
Scrapy spider too, so a ratio against it mostly measures the server).

nginx comes from the distribution's packages (``nginx-light``), installed with apt
when it is missing (bench/system_packages.py). One nginx process (one worker) serves every folder
given, each on a port of its own, with ETag and Last-Modified on, no gzip, no access log.
"""

import os
import socket
import subprocess
import time
from pathlib import Path

import system_packages

MIME_TYPES = Path("/etc/nginx/mime.types")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config(roots: list[Path], ports: list[int], prefix: Path) -> str:
    servers = "".join(
        f"  server {{ listen 127.0.0.1:{port} reuseport; root {root.resolve()}; index index.html; }}\n"
        for root, port in zip(roots, ports)
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    types = f"  include {MIME_TYPES};\n" if MIME_TYPES.exists() else "  types { application/json json; }\n"
    return (
        f"{user}worker_processes 1;\ndaemon off;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log warn;\n"
        "events { worker_connections 4096; }\n"
        "http {\n"
        f"{types}"
        "  default_type application/octet-stream;\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n"
        "  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n"
        f"  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n"
        f"  fastcgi_temp_path {prefix}/fastcgi;\n  uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n"
        f"{servers}"
        "}\n"
    )


def start(roots: list[Path], prefix: Path) -> tuple[subprocess.Popen, list[str]]:
    """One nginx serving each of ``roots`` on a port of its own; its process and base URLs."""
    binary = system_packages.ensure("nginx", "nginx-light")
    prefix.mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in roots]
    conf = prefix / "nginx.conf"
    conf.write_text(config(roots, ports, prefix.resolve()))
    process = subprocess.Popen(
        [binary, "-p", str(prefix.resolve()), "-c", str(conf.resolve())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    deadline = time.monotonic() + 10
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {(prefix / 'error.log').read_text()[-2000:]}") from None
                time.sleep(0.05)
    return process, urls
