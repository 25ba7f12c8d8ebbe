"""The crawl's Scrapy extensions: its archive, the record ledger, the signing-key watch,
the progress line, the stats file and the garbage collector's threshold."""
