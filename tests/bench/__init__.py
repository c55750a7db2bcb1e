"""gradgen's benchmark suite: ``python -m tests.bench`` (see ``__main__.py``)."""
