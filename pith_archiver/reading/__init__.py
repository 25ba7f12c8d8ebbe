"""What the commands read: the targets of ``verify`` (files, folders, URLs, S3), proof
files, and a committed archive for ``audit``, ``serve`` and ``export``."""
