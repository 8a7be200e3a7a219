"""The one helper every external command goes through: failures become data, never exceptions."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one external command did. ``error`` is set when it did not run to a zero exit."""

    args: tuple[str, ...]
    returncode: int | None
    """None when the command could not start or timed out."""
    stdout: str
    stderr: str
    error: str | None
    """'not found: ...', 'timed out after N s', 'exit code N: <first stderr line>' or an OS error."""
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return {
            "args": list(self.args),
            "returncode": self.returncode,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "error": self.error,
            "duration_s": round(self.duration_s, 3),
        }

    @classmethod
    def from_dict(cls, d: dict) -> CommandResult:
        return cls(
            args=tuple(d.get("args", ())),
            returncode=d.get("returncode"),
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            error=d.get("error"),
            duration_s=float(d.get("duration_s", 0.0)),
        )


MAX_TIMEOUT_S = 86_400.0
"""Longest wait for one probe, seconds (a NaN or infinite timeout means this)."""
MAX_OUTPUT_BYTES = 1 << 20
"""Most bytes kept from each of a probe's stdout and stderr (1 MiB); past it the probe is stopped."""


def run_command(
    args: list[str] | tuple[str, ...], *, timeout_s: float = 10, cwd: str | None = None,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
) -> CommandResult:
    """Run ``args`` (no shell) and capture its text output. Never raises.

    Reads at most ``max_output_bytes`` from each stream: a probe that prints more (an ``nvidia-smi``
    that never stops) is killed with its process group and reported as an error, so memory stays bounded."""
    start = time.monotonic()
    argv = tuple(args)
    # "never raises": NaN or an infinite/huge timeout would break select() and wait(); a day is the most
    timeout_s = MAX_TIMEOUT_S if not timeout_s == timeout_s else min(max(float(timeout_s), 0.0), MAX_TIMEOUT_S)

    def done(rc: int | None, out: str, err: str, error: str | None) -> CommandResult:
        return CommandResult(argv, rc, out.strip(), err.strip(), error, round(time.monotonic() - start, 3))

    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,  # a timeout kills the whole group, grandchildren included
        )
    except FileNotFoundError:
        return done(None, "", "", f"not found: {argv[0]}")
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return done(None, "", "", f"{type(exc).__name__}: {exc}")
    out_b, err_b, why = _read_bounded(proc, timeout_s=timeout_s, max_bytes=max_output_bytes)
    out = out_b.decode("utf-8", errors="replace")
    err = err_b.decode("utf-8", errors="replace")
    if why is not None:
        _kill_group(proc)
        try:
            proc.wait(timeout=2)
        except (subprocess.TimeoutExpired, OSError):
            pass
        _close(proc)
        return done(None, out, "", why)
    _close(proc)
    if proc.returncode != 0:
        first = (err.strip() or out.strip()).splitlines()
        why = f": {first[0][:200]}" if first else ""
        return done(proc.returncode, out, err, f"exit code {proc.returncode}{why}")
    return done(proc.returncode, out, err, None)


def _close(proc: subprocess.Popen) -> None:
    for stream in (proc.stdout, proc.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def _read_bounded(proc: subprocess.Popen, *, timeout_s: float, max_bytes: int) -> tuple[bytes, bytes, str | None]:
    """Both pipes until EOF and exit, the deadline, or ``max_bytes`` on either; (stdout, stderr, why stopped)."""
    import selectors

    deadline = time.monotonic() + timeout_s
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for stream in bufs:
        sel.register(stream, selectors.EVENT_READ)
    why: str | None = None
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                why = f"timed out after {timeout_s:g} s"
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:
                break  # exited, but a background child holds the pipes open: keep what came
            for key, _ in sel.select(timeout=min(left, 0.1)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.fileobj]
                buf += chunk[: max(0, max_bytes - len(buf))]
                if len(chunk) and len(buf) >= max_bytes:
                    name = "stdout" if key.fileobj is proc.stdout else "stderr"
                    why = f"printed more than {max_bytes:,} bytes on {name}; stopped"
                    break
            if why:
                break
        if why is None:
            left = max(0.0, deadline - time.monotonic())
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                why = f"timed out after {timeout_s:g} s"
    finally:
        sel.close()
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), why


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group this helper started for ``proc`` (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        proc.kill()
