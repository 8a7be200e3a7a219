"""A single-threaded helper process that forks one child per planning request.

The web server is threaded; forking from it could copy a lock another thread holds. This helper
is started once with ``subprocess`` (``python -m trainfit.serve.forkhelper SOCKET``, the auth key
on stdin), imports the planner, and then only accepts connections and forks: each child reads
``(kind, body, memory_bytes)``, answers with its pid, sets its memory limit, plans and sends
``(status, payload)``. The server kills a child that runs past its time. The helper exits when
its stdin closes, i.e. when the server process ends.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _watch_stdin() -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def main(path: str) -> None:
    from multiprocessing.connection import Listener

    from trainfit.serve import worker  # noqa: F401 - imported once here, inherited by every child

    authkey = bytes.fromhex(sys.stdin.buffer.readline().decode().strip())
    listener = Listener(path, family="AF_UNIX", authkey=authkey)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    threading.Thread(target=_watch_stdin, daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError):
            continue
        except Exception:  # noqa: BLE001 - e.g. a failed authentication: drop that connection
            continue
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                kind, body, mem = conn.recv()
                conn.send(os.getpid())
                worker.child(kind, body, conn, mem)
            except BaseException:  # noqa: BLE001 - the parent reports a crash
                code = 1
            finally:
                os._exit(code)
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1])
