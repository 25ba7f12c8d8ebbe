"""Text from outside (a remote server, a bundle, an archive) made safe to print: its
control characters (C0 but newline and tab, DEL, C1, bidi overrides and isolates,
line separators) spelled ``\\uXXXX``, so no escape sequence, bell, carriage return or
reordering reaches a terminal or a log raw. The spelling is also a JSON string escape,
so a JSON line stays valid JSON. Every command's output and every log line pass
through here (``pith_archiver.output``)."""

import logging
import re

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every unsafe character spelled ``\\uXXXX``."""
    return UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


class PrintableLog(logging.Filter):
    """A handler filter that formats each record's message once and escapes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if UNSAFE.search(message):
            record.msg, record.args = printable(message), None
        return True
