"""The Scrapy project: settings, the ``pith`` spider, its middlewares and extensions."""
