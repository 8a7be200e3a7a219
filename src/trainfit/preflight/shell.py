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


def run_command(args: list[str] | tuple[str, ...], *, timeout_s: float = 10, cwd: str | None = None) -> CommandResult:
    """Run ``args`` (no shell) and capture its text output. Never raises."""
    start = time.monotonic()
    argv = tuple(args)

    def done(rc: int | None, out: str, err: str, error: str | None) -> CommandResult:
        return CommandResult(argv, rc, out.strip(), err.strip(), error, round(time.monotonic() - start, 3))

    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            cwd=cwd,
            start_new_session=True,  # a timeout kills the whole group, grandchildren included
        )
    except FileNotFoundError:
        return done(None, "", "", f"not found: {argv[0]}")
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return done(None, "", "", f"{type(exc).__name__}: {exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, _ = proc.communicate(timeout=2)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            out = ""
        return done(None, out or "", "", f"timed out after {timeout_s:g} s")
    out, err = out or "", err or ""
    if proc.returncode != 0:
        first = (err.strip() or out.strip()).splitlines()
        why = f": {first[0][:200]}" if first else ""
        return done(proc.returncode, out, err, f"exit code {proc.returncode}{why}")
    return done(proc.returncode, out, err, None)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group this helper started for ``proc`` (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        proc.kill()
