"""A C2SP tlog-witness, so that archives witness one another's logs: it cosigns a
log's checkpoint only once a consistency proof shows the log grew from the one it
holds, keeps its latest view of each log in SQLite (``state``), and answers over the
mirror's hardened HTTP server (``server``)."""
