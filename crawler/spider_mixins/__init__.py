"""The ``pith`` spider's mixins, one concern each, each declaring what it needs of the
spider: the sitemap walk, the state.json check and the cross-check sample."""
