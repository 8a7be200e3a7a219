"""Fixtures of the watch tests; the shared helpers live in watch_support (a unique module name:
`from conftest import ...` is ambiguous when several test folders have a conftest.py)."""

from watch_support import tiny_model  # noqa: F401  (the fixture)
