"""The commands, one module each (``X.py`` holds ``pith-archiver X``), loaded on demand by
``pith_archiver.cli``."""
