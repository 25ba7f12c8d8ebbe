"""Item pipelines: verification, then archiving."""
