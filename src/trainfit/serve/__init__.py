"""`trainfit serve`: a local web page and a small JSON API over the planner (docs/api.md)."""

from trainfit.serve.app import MAX_BODY_BYTES, make_server, start_in_thread

__all__ = ["MAX_BODY_BYTES", "make_server", "start_in_thread"]
