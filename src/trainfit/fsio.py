"""Atomic output writes: a temporary file in the target's folder, fsync, then rename.

A failed write leaves nothing behind (the temporary file is removed) and the target untouched.
Errors are user errors (``trainfit.errors.OutputError``): one line naming the path and the reason.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from trainfit.errors import OutputError

PathLike = str | os.PathLike[str]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


_ABSENT_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
"""What ``pathlib``'s ``exists``/``is_dir``/``is_file`` answer False for; any other error they raise."""


def lookup_error(path: PathLike) -> str | None:
    """Why the OS cannot look ``path`` up at all, or None (it exists, or is plainly missing).

    ``Path.exists``/``is_dir``/``is_file`` raise instead of answering False for a name longer than the file
    system allows (ENAMETOOLONG), a folder on the way that cannot be searched (EACCES) or a NUL byte
    (ValueError); callers ask this first and refuse the path in one line."""
    try:
        os.stat(path)
    except ValueError:
        return "the path holds a NUL byte"
    except OSError as exc:
        if exc.errno not in _ABSENT_ERRNOS:
            return _reason(exc)
    return None


def special_file(path: PathLike) -> str | None:
    """What ``path`` is when it exists but is neither a regular file nor a folder ("a named pipe", "a device",
    "a socket"), else None. Read as an input, a pipe with no writer blocks forever and ``/dev/zero`` never
    ends: such a path is refused by name, not called missing."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def is_devnull(path: PathLike) -> bool:
    """Whether ``path`` is the null device (``os.devnull``, or a link to it): read, it is empty."""
    try:
        return os.path.samefile(path, os.devnull)
    except (OSError, ValueError):
        return False


def read_once_refusal(path: PathLike) -> str | None:
    """``special_file``'s answer for an input read once from start to end, or None when it may be read.

    A named pipe passes (``<(...)`` in a shell is one), as do ``os.devnull`` (empty) and ``/dev/stdin``;
    other devices (``/dev/zero`` never ends) and sockets are refused by name."""
    kind = special_file(path)
    if kind is None or kind == "a named pipe" or is_devnull(path):
        return None
    try:
        if os.path.exists("/dev/stdin") and os.path.samefile(path, "/dev/stdin"):
            return None
    except (OSError, ValueError):
        pass
    return kind


def check_file_path(path: PathLike, *, what: str, error: type[Exception], give: str, lookup_verb: str = "read",
                    special_hint: str = "", walk_parents: bool = False, must_exist: bool = False) -> Path:
    """Refuse, as one line raised as ``error``, a path that can never be the regular file ``what`` names; else
    ``Path(path)``. In this order:

    * the OS cannot look it up (``lookup_error``; with ``walk_parents`` each folder above it too):
      ``{what}: cannot {lookup_verb} '{path}' ({reason})``;
    * a folder: ``{what}: '{path}' is a directory; give {give}``;
    * a named pipe, a device (``os.devnull`` included: a caller that takes it as "nothing" asks ``is_devnull``
      first) or a socket: ``{what}: '{path}' is {kind}, not a file; give {give}{special_hint}``;
    * with ``must_exist``, anything but an existing regular file: ``{what}: no such file '{path}'``;
    * a path through a file: ``{what}: '{path}' passes through the file '{file}'; give {give}``.

    Without ``must_exist`` a path that does not exist yet passes (a file written later, or one that is optional).
    Paths in messages are shortened (``_short``). Reads nothing: a pipe is never opened."""
    p = Path(path)
    shown = _short(str(p))
    for q in (p, *p.parents) if walk_parents else (p,):
        reason = lookup_error(q)
        if reason is not None:
            raise error(f"{what}: cannot {lookup_verb} '{shown}' ({reason})")
    if p.is_dir():
        raise error(f"{what}: '{shown}' is a directory; give {give}")
    kind = special_file(p)
    if kind is not None:
        raise error(f"{what}: '{shown}' is {kind}, not a file; give {give}{special_hint}")
    if must_exist and not p.is_file():
        raise error(f"{what}: no such file '{shown}'")
    through = next((q for q in p.parents if lookup_error(q) is None and q.exists() and not q.is_dir()), None)
    if through is not None:
        raise error(f"{what}: '{shown}' passes through the file '{_short(str(through))}'; give {give}")
    return p


def read_bytes_bounded(path: PathLike, *, limit_bytes: int) -> bytes:
    """At most ``limit_bytes + 1`` bytes of ``path`` (one more than allowed: the caller tells "too large" apart).

    Opened with O_NONBLOCK, so a named pipe with no writer does not block the open; reads then block as ``cat``
    does, and a pipe whose writer never came reads as empty (end of file) instead of waiting for ever.
    Raises OSError as ``open`` does."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = limit_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_bounded(path: PathLike, *, limit_bytes: int, what: str, error: type[Exception], give: str,
                      too_large_give: str, strict_utf8: bool, name_missing: bool = False) -> str:
    """The text of a user's input file read once from start to end, at most ``limit_bytes`` bytes; else ``error``
    raised with one line. ``path`` is shortened in each message (``_short``). In this order:

    * the OS cannot look it up (``lookup_error``): ``{what}: cannot read '{path}' ({reason})``;
    * a device other than the null device and ``/dev/stdin``, or a socket (``read_once_refusal``; a named pipe
      such as the shell's ``<(...)`` is read): ``{what}: '{path}' is {kind}, not a file; {give}``;
    * missing, with ``name_missing``: ``{what}: no such file '{path}'``;
    * any other read error (a directory: "Is a directory"): ``{what}: cannot read '{path}' ({strerror})``;
    * more than ``limit_bytes``: ``{what}: '{path}' is larger than {limit_bytes // 2**20} MiB; {too_large_give}``;
    * nothing read from a named pipe (its writer never came: ``read_bytes_bounded`` does not wait for one):
      ``{what}: the named pipe '{path}' gave nothing to read (no writer); {give}``;
    * with ``strict_utf8``, bytes that are not UTF-8: ``{what}: '{path}' is not UTF-8 text (byte {n}); {give}``;
      without it they are decoded with U+FFFD in their place.

    Calibrate's inputs and ``diagnose --log`` read through this. ``spec.safe_yaml.read_text_limited`` (cards, configs,
    ``--audit``) and ``calibration.file.load_calibration`` do not: they refuse a named pipe and the null device, which
    these two read, and word their refusals otherwise (a folder "is a directory; give a file", unshortened paths)."""
    shown = _short(str(path))
    reason = lookup_error(path)
    if reason is not None:
        raise error(f"{what}: cannot read '{shown}' ({reason})")
    kind = read_once_refusal(path)  # /dev/zero never ends
    if kind is not None:
        raise error(f"{what}: '{shown}' is {kind}, not a file; {give}")
    try:
        raw = read_bytes_bounded(path, limit_bytes=limit_bytes)
    except OSError as exc:
        if name_missing and isinstance(exc, FileNotFoundError):
            raise error(f"{what}: no such file '{shown}'") from None
        raise error(f"{what}: cannot read '{shown}' ({exc.strerror or exc})") from None
    if len(raw) > limit_bytes:
        raise error(f"{what}: '{shown}' is larger than {limit_bytes // 2**20} MiB; {too_large_give}")
    if not raw and special_file(path) == "a named pipe":
        raise error(f"{what}: the named pipe '{shown}' gave nothing to read (no writer); {give}")
    if not strict_utf8:
        return raw.decode(errors="replace")
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise error(f"{what}: '{shown}' is not UTF-8 text (byte {exc.start}); {give}") from None


def check_output_path(path: PathLike, *, inputs: Iterable[PathLike | None] = (), what: str = "output") -> Path:
    """Validate ``path`` before any work is done: not a directory, folder exists, not one of ``inputs``."""
    p = Path(path)
    if str(path) == "" or str(path).endswith(("/", os.sep)):
        raise OutputError(f"{what}: '{path}' is not a file path")
    for q in (p, p.parent if str(p.parent) else Path(".")):
        reason = lookup_error(q)
        if reason is not None:
            raise OutputError(f"{what}: cannot use '{_short(str(path))}' ({reason})")
    if p.is_dir():
        raise OutputError(f"{what}: '{path}' is a directory; give a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise OutputError(f"{what}: folder '{parent}' does not exist; create it first")
    if not parent.is_dir():
        raise OutputError(f"{what}: '{parent}' is not a folder")
    for inp in inputs:
        if inp is not None and _same_file(p, Path(inp)):
            raise OutputError(f"{what}: '{path}' is one of the inputs; refusing to write over it")
    return p


def _short(text: str, limit: int = 120) -> str:
    """A path echoed in a message: at most ``limit`` characters (a name the OS refuses can be thousands)."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno == errno.EISDIR:
        return "is a directory"
    if exc.errno == errno.ENOENT:
        return "folder does not exist"
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long"
    if exc.errno == errno.ENXIO:
        return "a named pipe with no reader"
    return exc.strerror or type(exc).__name__


def write_bytes_atomic(path: PathLike, data: bytes, *, inputs: Iterable[PathLike | None] = (), what: str = "output") -> Path:
    """Write ``data`` to ``path`` atomically; raise ``OutputError`` (one line) on any failure.

    ``inputs`` are paths the command read: writing over one of them is refused.
    An existing target keeps its permission bits.
    """
    p = check_output_path(path, inputs=inputs, what=what)
    parent = p.parent if str(p.parent) else Path(".")
    own_fd = _own_open_fd(p)
    if own_fd is not None or (p.exists() and not p.is_file()):  # /dev/stdout, a device, a pipe: never renamed over
        _write_through(p, data, own_fd=own_fd, what=what, shown=str(path))
        return p
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{p.name[:64]}.", suffix=".tmp", dir=parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = os.stat(p).st_mode & 0o7777 if p.exists() else 0o666 & ~_umask()
            os.chmod(tmp_name, mode)
        except OSError:
            pass
        os.replace(tmp_name, p)
        tmp_name = None
    except OSError as exc:
        raise OutputError(f"{what}: cannot write '{path}': {_reason(exc)}") from exc
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass
    return p


_FD_LINK = re.compile(r"/proc/(self|thread-self|\d+)(?:/task/\d+)?/fd/(\d+)")
"""A process's open file as the kernel shows it: where ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N`` lead."""


def _own_open_fd(path: Path) -> int | None:
    """The file descriptor when ``path`` is, or links to, an open file of this process (``/dev/stdout``,
    ``/dev/fd/1``, ``/proc/self/fd/N``), else None: a stream to write into, whatever it leads to (a file the shell
    redirected stdout to is a regular file). Links are followed one hop at a time, each folder resolved, at most 40
    hops (the kernel's bound)."""
    p = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
    for _ in range(40):
        m = _FD_LINK.fullmatch(p)
        if m:
            ours = m.group(1) in ("self", "thread-self") or int(m.group(1)) == os.getpid()
            return int(m.group(2)) if ours else None
        try:
            target = os.readlink(p)
        except (OSError, ValueError):  # not a link (or not there): the path itself is what gets written
            return None
        target = os.path.join(os.path.dirname(p), target)
        p = os.path.join(os.path.realpath(os.path.dirname(target)), os.path.basename(target))
    return None


PIPE_READER_WAIT_S = 60.0
"""How long an output that is a named pipe waits for its reader before the one-line refusal. A plain
``echo x > p`` waits for ever; ``trainfit ... --out p & consumer < p`` starts both at once, so the reader may
open the pipe well after trainfit does (a consumer that loads first). A minute covers such a start while a pipe
nobody will ever read still ends in one line instead of hanging."""

PIPE_READER_POLL_S = 0.1
"""How often the non-blocking open of a named pipe is retried while it waits for its reader."""


def _open_pipe_for_writing(p: Path, flags: int) -> int:
    """Open the named pipe ``p`` without blocking, retrying every ``PIPE_READER_POLL_S`` while nobody reads it (ENXIO);
    says once on stderr that it waits, and raises the last ENXIO after ``PIPE_READER_WAIT_S``."""
    import sys
    import time

    deadline = time.monotonic() + PIPE_READER_WAIT_S
    said = False
    while True:
        try:
            return os.open(p, flags)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                raise
        if not said:
            print(f"waiting for a reader on {p}", file=sys.stderr, flush=True)
            said = True
        time.sleep(max(0.0, min(PIPE_READER_POLL_S, deadline - time.monotonic())))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_through(p: Path, data: bytes, *, own_fd: int | None, what: str, shown: str) -> None:
    """Write ``data`` into the stream ``p`` names. This process's own open file is written through its descriptor
    (after what the command printed there: stdout and stderr are flushed first; the descriptor's offset is shared,
    as a shell redirect expects). A named pipe is opened without blocking and the open retried while nobody reads it
    (ENXIO), so a reader that starts after trainfit still gets the output and one nobody reads ends in one line after
    ``PIPE_READER_WAIT_S`` instead of waiting for ever; once open it is written blocking (at the reader's pace)."""
    import stat
    import sys

    try:
        if own_fd is not None:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError, AttributeError):
                    pass
            _write_all(own_fd, data)
            return
        flags = os.O_WRONLY | os.O_TRUNC
        try:
            is_fifo = stat.S_ISFIFO(os.stat(p).st_mode)
        except (OSError, ValueError):
            is_fifo = False
        fd = _open_pipe_for_writing(p, flags | os.O_NONBLOCK) if is_fifo else os.open(p, flags)
        try:
            os.set_blocking(fd, True)
            _write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(f"{what}: cannot write '{shown}': {_reason(exc)}") from exc


def write_text_atomic(
    path: PathLike, text: str, *, inputs: Iterable[PathLike | None] = (), what: str = "output", encoding: str = "utf-8"
) -> Path:
    """Write ``text`` to ``path`` atomically (see ``write_bytes_atomic``)."""
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise OutputError(f"{what}: text for '{path}' cannot be encoded as {encoding}: {exc.reason}") from exc
    return write_bytes_atomic(path, data, inputs=inputs, what=what)


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` is not thread-safe to probe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
