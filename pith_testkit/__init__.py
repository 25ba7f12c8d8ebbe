"""pith-archiver's test kit: signed test corpora minted in the registry's format
(``mint``, ``papers``, ``corpus``, and ``virtual``, minted as they are asked for),
and a mirror server that injects faults (``faults``, ``server``), with their command
line (``python -m pith_testkit``). It builds on ``mirror``, ``pith`` and ``storage``
and the command line's options; nothing in the product imports it, and it is not in
the wheel: the tests and the benchmarks use it from a checkout."""
