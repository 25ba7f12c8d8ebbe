"""The crawl command's wing: its option table, its checks, its run, its stop, its report,
the embedded demo and the next steps it prints."""
