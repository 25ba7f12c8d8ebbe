"""Copying a peer archive through its signed logs (``sync``)."""
