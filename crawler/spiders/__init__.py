"""Spiders of the pith-archiver Scrapy project."""
