"""A conforming Pith mirror: the record sources it serves (a corpus folder,
``source``; an archive, ``archive_source``) and their catalog (``catalog``), the
resolver layout (``resolver``, ``pages``), and a small asyncio HTTP/1.1 server fit
for public use (``http``, ``limits``, ``server``, ``runner``). Test corpora and fault
injection are the test kit's (``pith_testkit``), which builds on this package."""
