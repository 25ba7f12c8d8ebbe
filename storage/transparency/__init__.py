"""The archive's logs in the transparency ecosystem: tiles any C2SP tlog client reads
(``tiles``), witness cosignatures (``cosign``) and the witness client (``witness_client``)."""
