"""Saved queries: the `saved-queries` routes (service.py) and the files they go out and come
in as (transfer.py)."""
