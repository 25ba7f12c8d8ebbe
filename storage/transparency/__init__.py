"""The archive's transparency: the storage attestation feed (``attestations``), each
archiver key's Merkle log (``key_logs``) as tiles any C2SP tlog client reads (``tiles``),
witness cosignatures (``cosign``) and the witness client (``witness_client``)."""
