"""Run untrusted candidate code for grading: fresh workspace, patch path checks, limits, no network.

Design (the candidate cannot change how it is scored):

* The patch is applied to a fresh copy of the task in ``<root>/ws`` with path checks
  (no absolute paths, no ``..``, nothing that resolves outside the workspace through a symlink).
* Test files in the workspace are then restored from the pristine task, and the hidden tests are
  copied into ``<root>/grader`` (mode 0700) *after* the patch. pytest runs there, trusted, from a
  ``conftest.py`` we control; the workspace is never on pytest's ``sys.path``.
* Candidate code runs only in a separate worker process (``spawn_worker``): own session/process
  group, a new network namespace, ``setrlimit`` on CPU, address space, processes and file size,
  and, when we are root, a different uid that can read neither the grader directory nor write the
  report. Each call has a timeout; the whole process group is killed afterwards.
* The score comes from pytest's ``--junitxml`` report, never from stdout.

Mechanisms the OS does not give are skipped with a warning (``isolation_warnings``).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

_MIB = 1024**2
SANDBOX_UID = 65534  # nobody
CLONE_NEWNET = 0x40000000

#: Files that change how pytest or Python behave; never taken from a patch.
CONTROL_FILES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py",
     "usercustomize.py"}
)


class PatchRejected(ValueError):
    """A patch operation names a path outside the workspace or is malformed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Per-run resource limits for candidate code."""

    call_timeout_s: float = 3.0
    """Wall-clock limit for one call into the candidate."""
    run_timeout_s: float = 30.0
    """Wall-clock limit for the whole pytest run."""
    cpu_s: int = 5
    """RLIMIT_CPU of the candidate worker (seconds of CPU time)."""
    address_space_bytes: int = 1024 * _MIB
    """RLIMIT_AS of the candidate worker."""
    max_processes: int = 16
    """RLIMIT_NPROC of the candidate uid (only enforced for a non-root uid)."""
    file_size_bytes: int = 16 * _MIB
    """RLIMIT_FSIZE of the candidate worker."""


@dataclass(slots=True, kw_only=True)
class GradeResult:
    """Outcome of grading one patch against one task's hidden tests."""

    reward: float
    """passed / expected hidden tests; 0.0 when the patch was rejected or the report is missing."""
    passed: int = 0
    expected: int = 0
    rejected: str | None = None
    """Why the patch was refused, if it was."""
    report_found: bool = False
    grader_error: str | None = None
    """The end of the grader's stderr when it wrote no report (diagnostics only; never used to score)."""
    detail: dict[str, str] = field(default_factory=dict)
    """Per hidden test: 'passed', 'failed', 'skipped', 'error' or 'missing'."""
    wall_s: float = 0.0


# ----------------------------------------------------------------------------- isolation probes
def _libc():
    return ctypes.CDLL(None, use_errno=True)


@lru_cache(maxsize=1)
def can_unshare_net() -> bool:
    """True when a child can get its own (empty) network namespace."""
    try:
        r = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@lru_cache(maxsize=1)
def candidate_python() -> tuple[str, bool]:
    """(interpreter, switch_uid): an interpreter the sandbox uid can run, and whether to switch uid."""
    if os.geteuid() != 0:
        return sys.executable, False
    for exe in (sys.executable, getattr(sys, "_base_executable", ""), "/usr/bin/python3"):
        if not exe:
            continue
        try:
            r = subprocess.run([exe, "-I", "-c", "pass"], preexec_fn=_drop_uid, capture_output=True,
                               timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return exe, True
    return sys.executable, False


def isolation_warnings() -> list[str]:
    """Mechanisms missing on this machine, each as one sentence."""
    out = []
    if not can_unshare_net():
        out.append("no network namespace (unshare -n failed): candidate code may reach the network")
    if not candidate_python()[1]:
        out.append("cannot switch to an unprivileged uid: candidate code can read files this user can, "
                   "including the hidden tests, and RLIMIT_NPROC may not bound a fork bomb")
    return out


def _drop_uid() -> None:
    os.setgroups([])
    os.setgid(SANDBOX_UID)
    os.setuid(SANDBOX_UID)


def _preexec(limits: Limits, net: bool, switch_uid: bool):
    def run() -> None:
        os.setsid()
        if net and _libc().unshare(CLONE_NEWNET) != 0:
            pass  # probe said it works; a failure here only loses the namespace
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes,) * 2)
        if switch_uid:
            _drop_uid()

    return run


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group led by ``proc`` (it was started with setsid) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# ----------------------------------------------------------------------------- candidate worker
_WORKER = r"""
import os, sys, json
rfd, wfd = os.dup(0), os.dup(1)
nul = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(nul, fd)
sys.path.insert(0, os.getcwd())
rf, wf = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
try:
    import solution
    err = None
except BaseException as e:
    solution, err = None, repr(e)[:300]
for line in rf:
    req = json.loads(line)
    if solution is None:
        resp = {"ok": False, "error": "import failed: " + err}
    else:
        try:
            resp = {"ok": True, "value": getattr(solution, req["fn"])(*req["args"])}
        except BaseException as e:
            resp = {"ok": False, "error": repr(e)[:300]}
    try:
        s = json.dumps(resp)
    except Exception:
        s = json.dumps({"ok": False, "error": "result is not JSON"})
    wf.write(s + "\n"); wf.flush()
"""


class CandidateError(AssertionError):
    """The candidate raised, timed out, died or returned garbage."""


class Candidate:
    """Calls into the candidate's ``solution`` module, running in a sandboxed worker process."""

    def __init__(self, workspace: Path, limits: Limits = Limits()):
        exe, switch_uid = candidate_python()
        env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "TMPDIR": str(workspace),
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        self.limits = limits
        self.proc = subprocess.Popen(
            [exe, "-I", "-c", _WORKER], cwd=workspace, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            preexec_fn=_preexec(limits, can_unshare_net(), switch_uid), close_fds=True,
        )

    def call(self, fn: str, *args):
        import select

        if self.proc.poll() is not None:
            raise CandidateError("candidate process is gone")
        try:
            self.proc.stdin.write((json.dumps({"fn": fn, "args": list(args)}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise CandidateError(f"candidate process is gone: {exc}") from None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.limits.call_timeout_s)
        if not ready:
            kill_group(self.proc)
            raise CandidateError(f"{fn} timed out after {self.limits.call_timeout_s} s")
        line = self.proc.stdout.readline(1 << 20)
        try:
            resp = json.loads(line)
        except ValueError:
            raise CandidateError("candidate died or wrote garbage") from None
        if not isinstance(resp, dict) or not resp.get("ok"):
            raise CandidateError(str(resp.get("error") if isinstance(resp, dict) else resp))
        return resp["value"]

    def close(self) -> None:
        kill_group(self.proc)


# ----------------------------------------------------------------------------- patches
def _safe_target(workspace: Path, rel: str) -> Path:
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise PatchRejected(f"bad path {rel!r}")
    p = PurePosixPath(rel)
    if p.is_absolute() or rel.startswith("~"):
        raise PatchRejected(f"absolute path {rel!r}")
    if ".." in p.parts:
        raise PatchRejected(f"'..' in path {rel!r}")
    target = workspace.joinpath(*p.parts)
    root = workspace.resolve()
    resolved = target.resolve()  # follows any symlink, existing or dangling
    if resolved != root and root not in resolved.parents:
        raise PatchRejected(f"{rel!r} resolves outside the workspace")
    if target.is_symlink():
        raise PatchRejected(f"{rel!r} is a symlink")
    return target


def apply_patch(workspace: Path, ops: list[dict]) -> None:
    """Apply write/delete operations; raise ``PatchRejected`` before touching anything if one is unsafe."""
    if not isinstance(ops, list):
        raise PatchRejected("patch must be a list of operations")
    checked = []
    for op in ops:
        if not isinstance(op, dict) or op.get("op") not in ("write", "delete"):
            raise PatchRejected(f"unknown operation {op!r}")
        checked.append((op, _safe_target(workspace, op.get("path"))))
    for op, target in checked:
        if op["op"] == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(str(op.get("content", "")))
        elif target.is_file():
            target.unlink()


# ----------------------------------------------------------------------------- grading
def _restore_tests(workspace: Path, files: dict[str, str]) -> None:
    """Drop every control file and test file the patch may have touched; restore the pristine ones."""
    for path in list(workspace.rglob("*")):
        if path.is_symlink() or (path.is_file() and (path.name in CONTROL_FILES or path.suffix == ".pth")):
            path.unlink()
    tests_dir = workspace / "tests"
    if tests_dir.exists():
        shutil.rmtree(tests_dir)
    for rel, text in files.items():
        if PurePosixPath(rel).name in CONTROL_FILES or rel.startswith("tests/"):
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(text)


_GRADER_CONFTEST = '''
import os, pytest
from pathlib import Path
from trainfit.accept.sandbox import Candidate, Limits

@pytest.fixture(scope="module")
def candidate():
    c = Candidate(Path(os.environ["TRAINFIT_WORKSPACE"]), Limits(**{LIMITS}))
    yield c
    c.close()
'''


def grader_env(ws: Path) -> dict[str, str]:
    """The trusted grader's environment: a clean one, plus the directory trainfit is imported from
    (its conftest imports ``trainfit.accept.sandbox``; a source checkout run with ``PYTHONPATH=src``
    would otherwise fail to collect and score every patch 0)."""
    pkg_root = str(Path(__file__).resolve().parents[2])
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TRAINFIT_WORKSPACE": str(ws),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": pkg_root}


def _parse_junit(xml_path: Path, expected: list[str]) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    status = {name: "missing" for name in expected}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name", "")
        if name not in status or status[name] != "missing":
            continue
        tags = {child.tag for child in case}
        status[name] = ("failed" if "failure" in tags else "error" if "error" in tags
                        else "skipped" if "skipped" in tags else "passed")
    return status


def grade(files: dict[str, str], hidden_tests: str, hidden_names: list[str], ops: list[dict],
          limits: Limits = Limits()) -> GradeResult:
    """Grade one patch: fresh workspace, checked patch, restored tests, hidden tests, junit report."""
    t0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="trainfit-accept-"))
    try:
        ws, grader = root / "ws", root / "grader"
        for rel, text in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        try:
            apply_patch(ws, ops)
        except PatchRejected as exc:
            return GradeResult(reward=0.0, expected=len(hidden_names), rejected=str(exc),
                               detail={n: "missing" for n in hidden_names},
                               wall_s=time.perf_counter() - t0)
        _restore_tests(ws, files)
        grader.mkdir(mode=0o700)  # hidden tests arrive only now, where the candidate cannot read them
        (grader / "test_hidden.py").write_text(hidden_tests)
        limits_src = json.dumps({k: getattr(limits, k) for k in Limits.__slots__})
        (grader / "conftest.py").write_text(_GRADER_CONFTEST.replace("{LIMITS}", limits_src))
        (grader / "pytest.ini").write_text("[pytest]\n")
        os.chmod(root, 0o711)
        for path in [ws, *ws.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # readable, not writable, by the sandbox uid
        report = grader / "junit.xml"
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(grader),
                 "-c", str(grader / "pytest.ini"), f"--junitxml={report}", str(grader / "test_hidden.py")],
                cwd=grader, env=grader_env(ws), stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True,
            )
            try:
                proc.wait(timeout=limits.run_timeout_s)
            except subprocess.TimeoutExpired:
                pass
            kill_group(proc)
            err.seek(0)
            stderr_tail = err.read()[-600:].decode(errors="replace").strip()
        found = report.exists()
        detail = _parse_junit(report, hidden_names) if found else {n: "missing" for n in hidden_names}
        passed = sum(v == "passed" for v in detail.values())
        return GradeResult(reward=passed / len(hidden_names), passed=passed, expected=len(hidden_names),
                           report_found=found, grader_error=None if found else (stderr_tail or "no report"),
                           detail=detail, wall_s=time.perf_counter() - t0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
