"""Publishing an archive: exports (a bag or a copy) and dataset releases, with their
cards, each checked again before it is called done."""
