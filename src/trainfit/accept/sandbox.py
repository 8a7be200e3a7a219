"""Run untrusted candidate code for grading: checked patch, hidden tests copied in afterwards, a jail.

Design (the candidate cannot change how it is scored, see what scores it, or outlive its grading):

* The patch is checked as a whole before anything is written (``check_patch``): every operation
  either applies or the patch is rejected with a reason; no patch shape raises anything else.
* Test and control files in the workspace are then restored from the pristine task, and the hidden
  tests are copied into ``<root>/grader`` (mode 0700) *after* the code is final (as SWE-bench's
  harness does). pytest runs there, trusted, from a ``conftest.py`` we control; the workspace is never
  on pytest's ``sys.path`` and candidate code never runs inside the pytest process.
* Candidate code runs only in a jailed worker (``Candidate``), which tests call into over a pipe:

  - new mount, PID, network, IPC and UTS namespaces (plus a user namespace when not root);
  - a root filesystem built on an empty tmpfs that holds only the interpreter and system
    libraries (read-only), the workspace at ``/ws`` (read-only), and private, empty, size-limited
    ``/tmp``, ``/var/tmp`` and ``/dev/shm``. The trainfit package (where the sealed hidden tasks
    live) is covered by an empty mount even where it sits inside a mounted tree, and so is any
    other trainfit installed in those trees' site directories; the grader's directory is not in the jail at all;
  - a fresh uid per candidate (as root), no new privileges, ``setrlimit`` on CPU, address space,
    processes and file size; a timeout per call;
  - the worker's parent is the PID namespace's init. When grading ends the launcher kills that init
    and waits for it: the kernel kills everything left in the namespace (double-forked, setsid
    daemons included) before the wait returns. ``grade`` waits for every launcher to finish.

* The score comes from pytest's ``--junitxml`` report, never from stdout.

Where the jail cannot be built (no namespaces), the grader fails closed: ``grade`` raises
``SandboxUnavailable`` with one line saying why, instead of running candidate code unconfined.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

from trainfit.errors import TrainfitError

_MIB = 1024**2
SETUP_FAILED_EXIT = 97
"""Exit code of the launcher when it could not build the jail (its stderr says which step)."""

#: Files that change how pytest or Python behave; never taken from a patch.
CONTROL_FILES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py",
     "usercustomize.py"}
)

# Patch bounds: past any of these a patch is rejected, with the bound named.
MAX_OPS = 256
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
MAX_PATH_DEPTH = 16
MAX_FILE_BYTES = 1 * _MIB
MAX_PATCH_BYTES = 4 * _MIB
MAX_REPLY_BYTES = 1 * _MIB
"""Longest reply line a candidate call may write (its JSON value and the newline)."""


class PatchRejected(ValueError):
    """A patch operation names a path outside the workspace or is malformed."""


class SandboxUnavailable(TrainfitError):
    """Candidate code cannot be isolated on this machine, so nothing is graded (fail closed)."""


MIN_PROCESS_ADDRESS_SPACE_BYTES = 64 * _MIB
"""Least RLIMIT_AS a candidate process is given: the worker's interpreter with its imports (os, json, shutil,
subprocess) peaks at 22.8 MB of virtual memory (VmPeak, CPython 3.11 -I -S), and its call needs room beside it."""


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
    """The candidate's address space as a whole: each of its processes gets an equal share as its RLIMIT_AS
    (``process_address_space_bytes``), so all ``max_processes`` of them together hold at most this. RLIMIT_AS is
    per process; given whole to each, a candidate that forked held ``max_processes`` times it."""
    max_processes: int = 4
    """RLIMIT_NPROC of the candidate uid (processes and threads). The worker is one; a candidate needs no more."""
    file_size_bytes: int = 16 * _MIB
    """RLIMIT_FSIZE of the candidate worker."""
    tmp_bytes: int = 16 * _MIB
    """Size of each private tmpfs (``/tmp``, ``/var/tmp``, ``/dev/shm``) in the jail."""

    def __post_init__(self) -> None:
        if self.max_processes < 1:
            raise ValueError(f"Limits.max_processes: {self.max_processes}; allowed: 1 or more (the worker is one)")
        if self.process_address_space_bytes < MIN_PROCESS_ADDRESS_SPACE_BYTES:
            raise ValueError(f"Limits.address_space_bytes: {self.address_space_bytes} over {self.max_processes}"
                             f" processes leaves each {self.process_address_space_bytes} bytes; allowed: at least"
                             f" {MIN_PROCESS_ADDRESS_SPACE_BYTES // _MIB} MiB per process (raise it or lower"
                             " max_processes)")

    @property
    def process_address_space_bytes(self) -> int:
        """RLIMIT_AS of each candidate process: its share of ``address_space_bytes``."""
        return self.address_space_bytes // self.max_processes


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


# ----------------------------------------------------------------------------- the jail
# The launcher is trusted code, run by the grader's own interpreter. It unshares the namespaces, forks
# the PID namespace's init, and waits for it; SIGTERM (or the death of the process that started it)
# makes it SIGKILL that init, which takes the whole namespace with it, and then it still waits.
_LAUNCHER = r"""
import ctypes, json, os, select, signal, sys
cfg = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
libc.unshare.argtypes = (ctypes.c_int,)
libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = 0x20000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
RELATIME = 1 << 21
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}.get(os.uname().machine)

def fail(step):
    err = ctypes.get_errno()
    os.write(2, ("sandbox: %s: %s\n" % (step, os.strerror(err) if err else "failed")).encode())
    os._exit(97)

def ok(rc, step):
    if rc != 0:
        fail(step)

def mount(src, dst, fstype, flags, data, step):
    ctypes.set_errno(0)
    ok(libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), flags,
                  data and data.encode()), step)

def bind_ro(src, dst):
    mount(src, dst, None, BIND | REC, None, "bind " + src)
    f = os.statvfs(dst).f_flag
    keep = (f & (RDONLY | NOSUID | NODEV | NOEXEC | 1024 | 2048)) | (RELATIME if f & 4096 else 0)
    mount(None, dst, None, REMOUNT | BIND | RDONLY | NOSUID | NODEV | keep, None, "read-only " + src)

def tmpfs(dst, size, mode, extra=0):
    mount("tmpfs", dst, "tmpfs", NOSUID | NODEV | extra, "size=%d,mode=%o" % (size, mode), "tmpfs " + dst)

def init(alive_r):
    # pid 1 of the new PID namespace; dies with the launcher
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    os.umask(0o022)
    if select.select([alive_r], [], [], 0)[0]:
        os._exit(1)  # the launcher is already gone
    root = cfg["jail"]
    tmpfs(root, 4 << 20, 0o755)
    for path in cfg["ro_dirs"]:
        os.makedirs(root + path, exist_ok=True)
        bind_ro(path, root + path)
    for link, target in cfg["links"]:
        os.makedirs(os.path.dirname(root + link), exist_ok=True)
        os.symlink(target, root + link)
    for path in cfg["ro_files"]:
        os.makedirs(os.path.dirname(root + path), exist_ok=True)
        open(root + path, "w").close()
        bind_ro(path, root + path)
    for path in cfg["masks"]:
        if os.path.isdir(root + path) and not os.path.islink(root + path):
            tmpfs(root + path, 4096, 0o555, RDONLY | NOEXEC)
    os.makedirs(root + "/ws")
    bind_ro(cfg["workspace"], root + "/ws")
    os.makedirs(root + "/dev")
    for name in ("null", "zero", "random", "urandom"):
        open(root + "/dev/" + name, "w").close()
        mount("/dev/" + name, root + "/dev/" + name, None, BIND, None, "bind /dev/" + name)
    for path in ("/tmp", "/var/tmp", "/dev/shm"):
        os.makedirs(root + path, exist_ok=True)  # a read-only tree under /tmp is covered: /tmp stays private
        tmpfs(root + path, cfg["tmp_bytes"], 0o1777)
    os.chdir(root)
    if PIVOT_ROOT is None:
        if cfg["uid"] is None:
            os.write(2, b"sandbox: pivot_root: unknown architecture\n")
            os._exit(97)
        os.chroot(".")
    else:
        ctypes.set_errno(0)
        ok(libc.syscall(PIVOT_ROOT, b".", b"."), "pivot_root")
        ok(libc.umount2(b".", 2), "detach the old root")  # MNT_DETACH
    mount(None, "/", None, REMOUNT | BIND | RDONLY | NOSUID | NODEV, None, "read-only root")
    os.chdir("/ws")
    worker = os.fork()
    if worker == 0:
        import resource
        for res, v in cfg["rlimits"]:
            resource.setrlimit(getattr(resource, res), (v, v))
        if cfg["uid"] is not None:
            os.setgroups([])
            os.setgid(cfg["uid"])
            os.setuid(cfg["uid"])
        else:  # user-namespace root: a nested user namespace leaves no capability over this jail
            ok(libc.unshare(NEWUSER), "drop capabilities")
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        os.execve(cfg["python"], [cfg["python"], "-I", "-S", "-c", cfg["worker"]], cfg["env"])
    nul = os.open("/dev/null", os.O_RDWR)
    os.dup2(nul, 0)
    os.dup2(nul, 1)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == worker:
            os._exit(0)  # 97 stays reserved for a jail that could not be built

child = 0
def stop(*_):
    if not child:
        os._exit(1)  # nothing forked yet: nothing to tear down
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, stop)
libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: the grader died -> tear down below
if os.getppid() != cfg["ppid"]:
    os._exit(1)
uid, gid = os.getuid(), os.getgid()
flags = NEWNS | NEWPID | NEWNET | NEWIPC | NEWUTS | (NEWUSER if uid != 0 else 0)
ctypes.set_errno(0)
ok(libc.unshare(flags), "unshare")
if uid != 0:
    for name, text in (("setgroups", "deny"), ("uid_map", "0 %d 1" % uid), ("gid_map", "0 %d 1" % gid)):
        with open("/proc/self/" + name, "w") as f:
            f.write(text)
mount(None, "/", None, REC | PRIVATE, None, "make / private")
alive_r, alive_w = os.pipe()
TEARDOWN = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
signal.pthread_sigmask(signal.SIG_BLOCK, TEARDOWN)  # so `child` is set before stop() can run
child = os.fork()
if child == 0:
    for s in TEARDOWN:
        signal.signal(s, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, TEARDOWN)
    os.close(alive_w)
    for fd in cfg["close_fds"]:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        init(alive_r)
    except BaseException as e:
        os.write(2, ("sandbox: %r\n" % (e,)).encode())
    os._exit(97)
signal.pthread_sigmask(signal.SIG_UNBLOCK, TEARDOWN)
os.close(alive_r)
nul = os.open(os.devnull, os.O_RDWR)
os.dup2(nul, 0)
os.dup2(nul, 1)
_, status = os.waitpid(child, 0)  # returns once the namespace is empty
libc.umount2(cfg["jail"].encode(), 2)
try:
    os.rmdir(cfg["jail"])
except OSError:
    pass
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""

_WORKER = r"""
import os, sys, json
rfd, wfd = os.dup(0), os.dup(1)
nul = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(nul, fd)
sys.path.insert(0, os.getcwd())
rf, wf = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
# human-eval's execution guard: a tripwire for careless code, not the barrier (the jail is)
import builtins, shutil, subprocess
for name in ("kill", "killpg", "fork", "forkpty", "system", "putenv", "remove", "removedirs", "rmdir", "unlink",
             "setuid", "execv", "execve", "spawnv", "spawnve", "posix_spawn", "posix_spawnp", "chroot"):
    setattr(os, name, None)
shutil.rmtree = shutil.move = subprocess.Popen = None
builtins.exit = builtins.quit = None
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

#: Read-only system trees the interpreter may need; symlinks among them (merged /usr) are recreated.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache",)
#: Where an interpreter under a read-only tree keeps installed packages (CPython's ``sysconfig`` purelib and
#: platlib schemes, Debian's ``dist-packages`` and ``/usr/local``): another trainfit installed there is covered
#: too, since its sealed tasks open with the key every copy ships.
_SITE_DIRS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
              "lib64/python3*/site-packages", "local/lib/python3*/site-packages", "local/lib/python3*/dist-packages")
DONE_FD_ENV = "TRAINFIT_SANDBOX_DONE_FD"
"""Set by ``grade`` for its pytest run: a pipe end every launcher holds until its namespace is empty."""


@dataclass(frozen=True, slots=True)
class _JailPlan:
    python: str
    ro_dirs: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    ro_files: tuple[str, ...]
    masks: tuple[str, ...]


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@lru_cache(maxsize=1)
def _jail_plan() -> _JailPlan:
    """What the jail shows: the base interpreter's prefix and the system trees, minus trainfit itself."""
    python = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    ro_dirs, links = [], []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            links.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            ro_dirs.append(d)
    for d in (prefix, os.path.dirname(python)):
        if not _under(os.path.realpath(d), tuple(os.path.realpath(r) for r in ro_dirs)) and os.path.isdir(d):
            ro_dirs.append(d)
    ro_files = tuple(f for f in _SYSTEM_FILES if os.path.isfile(f))
    import trainfit

    masks = {os.path.realpath(os.path.dirname(trainfit.__file__))}
    from trainfit.accept.tasks import sealed_path

    masks.add(os.path.realpath(os.path.dirname(sealed_path())))
    masks.update(_installed_copies(tuple(ro_dirs)))
    return _JailPlan(python=python, ro_dirs=tuple(ro_dirs), links=tuple(links), ro_files=ro_files,
                     masks=tuple(sorted(masks)))


def _installed_copies(ro_dirs: tuple[str, ...]) -> set[str]:
    """Every other trainfit package (plain or inside an unzipped egg) in the site directories of the read-only
    trees: the grader may run from a checkout while a copy is installed into the interpreter's own prefix."""
    import glob

    found = set()
    for root in ro_dirs:
        for pattern in _SITE_DIRS:
            for site in glob.glob(os.path.join(glob.escape(root), pattern)):
                for pkg in (os.path.join(site, "trainfit"), *glob.glob(os.path.join(glob.escape(site), "trainfit-*.egg", "trainfit"))):
                    if os.path.isdir(pkg):  # a link to a copy elsewhere in the trees: its target is covered
                        found.add(os.path.realpath(pkg))
    return found


def _sandbox_uid() -> int | None:
    """A fresh uid for one candidate (as root), so no two candidates share a process count or can signal
    each other; ``None`` when not root (the jail then runs in a user namespace)."""
    if os.geteuid() != 0:
        return None
    try:
        first, _, count = (int(x) for x in Path("/proc/self/uid_map").read_text().split()[:3])
    except (OSError, ValueError):
        first, count = 0, 65535
    if first == 0 and count >= 2_000_000:
        return 1_000_000 + secrets.randbelow(1_000_000)
    return 65534  # nobody: the only uid we can count on being mapped


class CandidateError(AssertionError):
    """The candidate raised, timed out, died or returned garbage."""


class Candidate:
    """Calls into the candidate's ``solution`` module, running in a jailed worker process."""

    def __init__(self, workspace: Path, limits: Limits = Limits()):
        plan = _jail_plan()
        self.limits = limits
        self.uid = _sandbox_uid()
        # next to the workspace, so grade's clean-up takes it even if the launcher is killed outright
        self._jail = tempfile.mkdtemp(prefix="trainfit-jail-", dir=Path(workspace).resolve().parent)
        done_fd = int(os.environ[DONE_FD_ENV]) if os.environ.get(DONE_FD_ENV, "").isdigit() else None
        if done_fd is not None:
            try:
                os.fstat(done_fd)
            except OSError:
                done_fd = None
        rlimits = [("RLIMIT_CPU", limits.cpu_s), ("RLIMIT_AS", limits.process_address_space_bytes),
                   ("RLIMIT_FSIZE", limits.file_size_bytes), ("RLIMIT_CORE", 0),
                   ("RLIMIT_NPROC", limits.max_processes)]
        cfg = {"ppid": os.getpid(), "jail": self._jail, "workspace": str(Path(workspace).resolve()),
               "python": plan.python, "ro_dirs": plan.ro_dirs, "links": plan.links, "ro_files": plan.ro_files,
               "masks": plan.masks, "tmp_bytes": limits.tmp_bytes, "uid": self.uid, "rlimits": rlimits,
               "close_fds": [done_fd] if done_fd is not None else [], "worker": _WORKER,
               "env": {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                       "PYTHONDONTWRITEBYTECODE": "1"}}
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(cfg)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._err, start_new_session=True, close_fds=True,
            pass_fds=(done_fd,) if done_fd is not None else (),
        )

    def setup_error(self) -> str | None:
        """The launcher's one-line reason when it exited because the jail could not be built."""
        if self.proc.poll() != SETUP_FAILED_EXIT or self._err.closed:
            return None
        self._err.seek(0)
        lines = self._err.read()[-2000:].decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "sandbox: setup failed"

    def call(self, fn: str, *args):
        import select

        if self.proc.poll() is not None:
            raise CandidateError(self.setup_error() or "candidate process is gone")
        try:
            self.proc.stdin.write((json.dumps({"fn": fn, "args": list(args)}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise CandidateError(self.setup_error() or f"candidate process is gone: {exc}") from None
        # the whole reply, not only its first byte, must arrive within the call's time: a candidate that writes
        # part of a line and sleeps would otherwise hold the grader until the run's own timeout; past the bound
        # on its length, or with anything after its newline, the candidate is ended too (no later call can
        # read a reply written for an earlier one)
        fd, line = self.proc.stdout.fileno(), b""
        deadline = time.monotonic() + self.limits.call_timeout_s
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise CandidateError(f"{fn} timed out after {self.limits.call_timeout_s} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            line += chunk
            if len(line) > MAX_REPLY_BYTES or b"\n" in line[:-1]:
                self.close()
                raise CandidateError(f"{fn}: the reply is not one line of at most {MAX_REPLY_BYTES} bytes")
        try:
            resp = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            why = self.setup_error() or "candidate died or wrote garbage"
            self.close()
            raise CandidateError(why) from None
        if not isinstance(resp, dict) or not resp.get("ok"):
            raise CandidateError(str(resp.get("error") if isinstance(resp, dict) else resp))
        return resp["value"]

    def close(self) -> None:
        """End the candidate's whole process tree and wait until it is gone."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the launcher kills the namespace's init, then waits
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(self.proc)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._err.close()
        shutil.rmtree(self._jail, ignore_errors=True)


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


_PROBE = '''
import os
def probe(paths):
    return {"uid": os.getuid(), "pid": os.getpid(), "tmp": os.listdir("/tmp"), "shm": os.listdir("/dev/shm"),
            "visible": [p for p in paths if os.path.exists(p)]}
'''


@lru_cache(maxsize=1)
def sandbox_status() -> str | None:
    """``None`` when candidate code can be jailed here, else one line saying why not.

    Builds a real jail once per process and checks from inside it that ``/tmp`` and ``/dev/shm`` are
    empty, that the worker is in its own PID namespace and that trainfit's package, the sealed tasks
    and the host's ``/tmp`` cannot be seen."""
    d = Path(tempfile.mkdtemp(prefix="trainfit-probe-"))
    try:
        (d / "solution.py").write_text(_PROBE)
        os.chmod(d, 0o755)
        os.chmod(d / "solution.py", 0o644)
        try:
            c = Candidate(d, Limits(call_timeout_s=20.0))
        except OSError as exc:
            return f"cannot isolate candidate code (cannot start the launcher: {exc})"
        try:
            seen = c.call("probe", [*_jail_plan().masks, str(d), tempfile.gettempdir() + "/" + d.name])
        except CandidateError as exc:
            return f"cannot isolate candidate code ({exc})"
        finally:
            c.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    problems = []
    if seen["tmp"] or seen["shm"]:
        problems.append("/tmp or /dev/shm is not private")
    if seen["pid"] == c.proc.pid or seen["pid"] > 16:
        problems.append("no PID namespace")
    if seen["visible"]:
        problems.append(f"the jail shows {seen['visible'][0]}")
    return f"cannot isolate candidate code: {'; '.join(problems)}" if problems else None


def require_sandbox() -> None:
    """Raise ``SandboxUnavailable`` (one line) when candidate code cannot be jailed on this machine."""
    reason = sandbox_status()
    if reason:
        raise SandboxUnavailable(
            f"{reason}; refusing to grade (needs root or unprivileged user namespaces with mount and PID "
            "namespaces, e.g. `unshare --mount --pid --fork --map-root-user true` must succeed)")


def isolation_warnings() -> list[str]:
    """Mechanisms missing on this machine, each as one sentence (empty when the jail works)."""
    reason = sandbox_status()
    return [reason] if reason else []


# ----------------------------------------------------------------------------- patches
def _reject(msg: str):
    raise PatchRejected(msg)


def _check_path(rel) -> PurePosixPath:
    if not isinstance(rel, str):
        _reject(f"path must be a string, got {type(rel).__name__}")
    if not rel:
        _reject("empty path")
    try:
        raw = rel.encode("utf-8")
    except UnicodeEncodeError as exc:
        _reject(f"path {rel[:80]!r} is not valid UTF-8 (character {exc.start})")
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        _reject(f"control character in path {rel[:80]!r}")
    if len(raw) > MAX_PATH_BYTES:
        _reject(f"path longer than {MAX_PATH_BYTES} bytes ({len(raw)})")
    p = PurePosixPath(rel)
    if p.is_absolute() or rel.startswith("~"):
        _reject(f"absolute path {rel!r}")
    if ".." in p.parts:
        _reject(f"'..' in path {rel!r}")
    if not p.parts:
        _reject(f"path {rel!r} names the workspace itself")
    if len(p.parts) > MAX_PATH_DEPTH:
        _reject(f"path deeper than {MAX_PATH_DEPTH} levels")
    for part in p.parts:
        if len(part.encode()) > MAX_NAME_BYTES:
            _reject(f"file name longer than {MAX_NAME_BYTES} bytes in {rel[:80]!r}...")
    return p


def _safe_target(workspace: Path, rel: str) -> Path:
    p = _check_path(rel)
    target = workspace.joinpath(*p.parts)
    try:
        root = workspace.resolve()
        resolved = target.resolve()  # follows any symlink, existing or dangling
    except (OSError, RuntimeError) as exc:
        _reject(f"cannot resolve {rel!r}: {exc}")
    if resolved != root and root not in resolved.parents:
        _reject(f"{rel!r} resolves outside the workspace")
    if target.is_symlink():
        _reject(f"{rel!r} is a symlink")
    return target


def _content(op: dict, rel: str) -> bytes:
    content = op.get("content", "")
    if not isinstance(content, str):
        _reject(f"content of {rel!r} must be a string, got {type(content).__name__}")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        _reject(f"content of {rel!r} is not valid UTF-8 (lone surrogate at character {exc.start})")
    if len(data) > MAX_FILE_BYTES:
        _reject(f"content of {rel!r} is larger than {MAX_FILE_BYTES} bytes ({len(data)})")
    return data


def check_patch(workspace: Path, ops) -> list[tuple[str, Path, bytes | None]]:
    """Validate a whole patch against the workspace without touching it.

    Returns ``(op, target, data)`` triples to apply, or raises ``PatchRejected`` with the reason. The
    patch is replayed on a model of the workspace's tree, so a write through a file, over a directory,
    or a delete of something missing is refused here rather than failing half-way."""
    if not isinstance(ops, list):
        _reject(f"patch must be a list of operations, got {type(ops).__name__}")
    if len(ops) > MAX_OPS:
        _reject(f"patch has more than {MAX_OPS} operations ({len(ops)})")
    files, dirs = set(), set()
    for path in workspace.rglob("*"):
        rel = path.relative_to(workspace).as_posix()
        (dirs if path.is_dir() and not path.is_symlink() else files).add(rel)
    out, total = [], 0
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            _reject(f"operation {i} must be a mapping, got {type(op).__name__}")
        kind = op.get("op")
        if kind not in ("write", "delete"):
            _reject(f"operation {i}: op must be 'write' or 'delete', got {str(kind)[:40]!r}")
        extra = set(op) - ({"op", "path", "content"} if kind == "write" else {"op", "path"})
        if extra:
            _reject(f"operation {i} ({kind}): unknown keys {sorted(map(str, extra))[:5]}")
        target = _safe_target(workspace, op.get("path"))
        rel = target.relative_to(workspace).as_posix()
        if kind == "write":
            data = _content(op, rel)
            total += len(data)
            if total > MAX_PATCH_BYTES:
                _reject(f"patch writes more than {MAX_PATCH_BYTES} bytes")
            parents = [p.as_posix() for p in reversed(PurePosixPath(rel).parents) if p.as_posix() != "."]
            blocked = next((p for p in parents if p in files), None)
            if blocked is not None:
                _reject(f"cannot write {rel!r}: {blocked!r} is a file, not a directory")
            if rel in dirs:
                _reject(f"cannot write {rel!r}: it is a directory")
            dirs.update(parents)
            files.add(rel)
            out.append(("write", target, data))
        else:
            if rel in dirs:
                _reject(f"cannot delete {rel!r}: it is a directory (delete removes files)")
            if rel not in files:
                _reject(f"cannot delete {rel!r}: no such file")
            files.discard(rel)
            out.append(("delete", target, None))
    return out


def apply_patch(workspace: Path, ops) -> None:
    """Apply write/delete operations; raise ``PatchRejected`` before touching anything if one is unsafe
    or cannot apply. An OS error while writing (a full disk) also becomes ``PatchRejected``."""
    for kind, target, data in check_patch(workspace, ops):
        try:
            if kind == "write":
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            else:
                target.unlink()
        except OSError as exc:
            _reject(f"cannot {kind} {target.relative_to(workspace).as_posix()!r}: {exc.strerror or exc}")


# ----------------------------------------------------------------------------- grading
def _restore_tests(workspace: Path, files: dict[str, str]) -> None:
    """Drop every control file and test file the patch may have touched; restore the pristine ones."""
    for path in sorted(workspace.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_symlink() or (path.name in CONTROL_FILES or path.suffix == ".pth"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    tests = workspace / "tests"
    if tests.is_dir() and not tests.is_symlink():
        shutil.rmtree(tests)
    elif tests.exists() or tests.is_symlink():
        tests.unlink()
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


def _wait_eof(fd: int, timeout_s: float) -> bool:
    import select

    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0] and not os.read(fd, 4096):
            return True
    return False


def grade(files: dict[str, str], hidden_tests: str, hidden_names: list[str], ops: list[dict],
          limits: Limits = Limits()) -> GradeResult:
    """Grade one patch: fresh workspace, checked patch, restored tests, hidden tests copied in last, a jailed
    candidate, junit report. Raises ``SandboxUnavailable`` (fail closed) where the jail cannot be built."""
    require_sandbox()
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
        grader.mkdir(mode=0o700)  # hidden tests arrive only now, in a directory the jail never shows
        (grader / "test_hidden.py").write_text(hidden_tests)
        limits_src = json.dumps({k: getattr(limits, k) for k in Limits.__slots__})
        (grader / "conftest.py").write_text(_GRADER_CONFTEST.replace("{LIMITS}", limits_src))
        (grader / "pytest.ini").write_text("[pytest]\n")
        for path in [ws, *ws.rglob("*")]:  # <root> stays 0700: the jail reaches ws only through its /ws mount
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # readable, not writable, by the sandbox uid
        report = grader / "junit.xml"
        done_r, done_w = os.pipe()
        try:
            with tempfile.TemporaryFile() as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(grader),
                     "-c", str(grader / "pytest.ini"), f"--junitxml={report}", str(grader / "test_hidden.py")],
                    cwd=grader, env={**grader_env(ws), DONE_FD_ENV: str(done_w)}, stdout=subprocess.DEVNULL,
                    stderr=err, start_new_session=True, pass_fds=(done_w,),
                )
                os.close(done_w)
                done_w = -1
                try:
                    proc.wait(timeout=limits.run_timeout_s)
                except subprocess.TimeoutExpired:
                    pass
                kill_group(proc)
                # every launcher holds done_w until its PID namespace is empty: EOF means nothing survives
                drained = _wait_eof(done_r, 15.0)
                err.seek(0)
                stderr_tail = err.read()[-600:].decode(errors="replace").strip()
        finally:
            os.close(done_r)
            if done_w >= 0:
                os.close(done_w)
        found = report.exists()
        detail = _parse_junit(report, hidden_names) if found else {n: "missing" for n in hidden_names}
        passed = sum(v == "passed" for v in detail.values())
        error = None if found else (stderr_tail or "no report")
        if not drained:
            error = "candidate processes were still running 15 s after grading"
        return GradeResult(reward=passed / len(hidden_names), passed=passed, expected=len(hidden_names),
                           report_found=found, grader_error=error, detail=detail,
                           wall_s=time.perf_counter() - t0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
