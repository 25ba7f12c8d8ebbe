"""nginx serving folders as plain files on loopback: the static server a registry, a
peer archive or a bucket website is in the tests, and the one the crawl benchmarks
compare against (``python -m http.server`` is slow enough to bound a bare Scrapy
spider too, so a ratio against it mostly measures the server).

nginx comes from the distribution's packages (``.ci/run`` installs it; the benchmarks
install ``nginx-light`` when it is missing). One nginx process (one worker) serves every
folder given, each on a port of its own, with ETag and Last-Modified on, no gzip, and an
access log only when asked for (one line a request: its method, path and status).
"""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

MIME_TYPES = Path("/etc/nginx/mime.types")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def find() -> str | None:
    """nginx's path: on PATH, or in /usr/sbin (its home, off a user's PATH)."""
    return shutil.which("nginx") or next((str(p) for p in [Path("/usr/sbin/nginx")] if p.is_file()), None)


def config(roots: list[Path], ports: list[int], prefix: Path, access_log: Path | None = None) -> str:
    servers = "".join(
        f"  server {{ listen 127.0.0.1:{port} reuseport; root {root.resolve()}; index index.html; }}\n"
        for root, port in zip(roots, ports)
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    logging = "access_log off;"
    if access_log is not None:
        logging = f"log_format requests '$request_method $uri $status';\n  access_log {access_log.resolve()} requests;"
    types = f"  include {MIME_TYPES};\n" if MIME_TYPES.exists() else "  types { application/json json; }\n"
    return (
        f"{user}worker_processes 1;\ndaemon off;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log warn;\n"
        "events { worker_connections 4096; }\n"
        "http {\n"
        f"{types}"
        "  default_type application/octet-stream;\n  sendfile on;\n  tcp_nopush on;\n"
        f"  {logging}\n"
        "  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n"
        f"  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n"
        f"  fastcgi_temp_path {prefix}/fastcgi;\n  uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n"
        f"{servers}"
        "}\n"
    )


def start(
    roots: list[Path], prefix: Path, binary: str | None = None, access_log: Path | None = None
) -> tuple[subprocess.Popen, list[str]]:
    """One nginx serving each of ``roots`` on a port of its own; its process and base URLs."""
    binary = binary or find()
    if binary is None:
        raise RuntimeError("nginx not found: install the distribution's nginx (apt-get install nginx-light)")
    prefix.mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in roots]
    conf = prefix / "nginx.conf"
    conf.write_text(config(roots, ports, prefix.resolve(), access_log))
    process = subprocess.Popen(  # noqa: S603 - the nginx found on this machine, our own config
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
