"""Writing a run into the archive: the archive writer, the run being written, its ledger,
uploads, table files and spool, and the commit that signs it all."""
