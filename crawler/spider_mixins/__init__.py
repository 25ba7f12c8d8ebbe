"""The ``pith`` spider's mixins, one concern each, each declaring what it needs of the
spider: the sources it fetches from, the fallback of a bad copy or a failed fetch, the
record pages and alias seeds, the sitemap walk, the state.json check and the cross-check
sample."""
