"""An item pipeline with a bug, for crawls that must not hide what a pipeline drops:
it raises on the first bundle it is handed (Scrapy logs the error and drops the item)."""


class RaiseOnFirstBundle:
    def __init__(self):
        self.raised = False

    def process_item(self, item):
        if type(item).__name__ == "BundleItem" and not self.raised:
            self.raised = True
            raise RuntimeError("a bug in a pipeline")
        return item
