"""A named pipe with a writer thread, for the tests that read a shell ``<(...)`` process substitution as an input
(``trainfit diagnose --log``, ``trainfit calibrate``)."""

from __future__ import annotations

import os
import threading
import time


def wait_for_reader(path, own_fd: int, *, timeout_s: float = 60.0) -> None:
    """Until another descriptor of this process opens the named pipe at ``path`` (the command under test reading it):
    data written into a pipe and closed before its reader opens it is dropped with the pipe, so a fixed delay races a
    slow start-up on a loaded machine."""
    target = os.path.realpath(path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name in os.listdir("/proc/self/fd"):
            if int(name) == own_fd:
                continue
            try:
                if os.readlink(f"/proc/self/fd/{name}") == target:
                    return
            except OSError:
                continue
        time.sleep(0.01)


def fifo_with_writer(path, data: bytes) -> threading.Thread:
    """A named pipe at ``path`` whose writer is present before the reader opens it (O_RDWR: Linux opens it without
    waiting) and, on a thread, sends ``data`` once the reader has opened it (``wait_for_reader``) and closes."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)

    def write():
        wait_for_reader(path, fd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except BrokenPipeError:  # the reader stopped at its bound
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t
