"""`trainfit serve`: the local web page and its JSON API (docs/api.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def serve(
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind. The API has no authentication: keep it on loopback.")] = "127.0.0.1",
    quiet: Annotated[bool, typer.Option("--quiet", help="No access log on stderr.")] = False,
) -> None:
    """A local web page to explore plans (pick a model or upload a config.json); JSON API under /api."""
    from trainfit.errors import TrainfitError
    from trainfit.serve.app import MAX_BODY_BYTES, make_server

    if not 0 <= port <= 65535:
        raise TrainfitError(f"--port: must be 0..65535, got {port}")
    if not host.strip():  # the socket layer reads an empty address as every interface, with no authentication
        raise TrainfitError(f"--host: {host!r} is no address (it would listen on every interface); allowed: an address,"
                            " e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface, said explicitly)")
    try:
        srv = make_server(host, port, quiet=quiet)
    except OSError as exc:
        raise TrainfitError(f"serve: cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.stderr.write(f"trainfit serve: warning: listening on {host}; the API has no authentication\n")
    sys.stderr.write(f"trainfit serve: {srv.url} (requests up to {MAX_BODY_BYTES // 1024} KiB; Ctrl-C stops)\n")
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
