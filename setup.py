"""For ``scrapyd-deploy`` only, which builds its egg with ``setup.py bdist_egg`` (and
writes a setup.py of its own, packaging every folder, where there is none). Everything
is configured in pyproject.toml; ``pip install .`` does not need this file."""

from setuptools import setup

setup()
