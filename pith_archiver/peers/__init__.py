"""Another archive as a source: ``sync PEER`` copies it, ``audit --repair-from PEER``
repairs from it."""
