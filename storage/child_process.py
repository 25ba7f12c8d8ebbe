"""A child process of our own code, spoken to over one socket in length-framed messages.

The crawl moves GIL-bound work per record (verifying a bundle, writing its WARC
records) to children on the other core: ``start_child("package.module")`` runs
``python -P -m package.module FD`` with the crawl's own import path (not the working
folder's), and hands back the process and the crawl's end of the socket. Each message
is its length (``FRAME``) and its bytes; no pickle crosses (a process that unpickles
runs whatever it is sent).
"""

import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import BinaryIO

FRAME = struct.Struct(">Q")  # each message: its length, then its bytes


def start_child(module: str) -> tuple[subprocess.Popen, socket.socket]:
    """``python -m module FD``, FD its end of a socket pair; returns the process and ours."""
    ours, theirs = socket.socketpair()
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    process = subprocess.Popen(  # noqa: S603 - this interpreter running a module of our own
        [sys.executable, "-P", "-m", module, str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
        env=environment,
    )
    theirs.close()
    return process, ours


def framed(*messages: bytes) -> bytes:
    """Messages as they go down the socket, each behind its length."""
    return b"".join(FRAME.pack(len(message)) + message for message in messages)


def messages(incoming: BinaryIO) -> Iterator[bytes]:
    """The messages read from a socket's file, until the other end closes it."""
    while len(header := incoming.read(FRAME.size)) == FRAME.size:
        yield incoming.read(FRAME.unpack(header)[0])


def socket_of(argv: list[str]) -> socket.socket:
    """In the child: the socket ``start_child`` passed as its one argument."""
    return socket.socket(fileno=int(argv[1]))
