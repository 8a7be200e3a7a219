"""Every known attack on the coding reward, with its expected outcome; a correct patch still scores 1.0.

The attacks come from fuzzing the first sandbox (35 crafted completions). "0" means graded and scored 0.0,
"rejected" means the patch was refused with a reason before any code ran (and so scored 0.0).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainfit.accept.checks import CALIBRATION_LIMITS
from trainfit.accept.reward import ATTACK_MARKER, attacks, grade_patch, more_attacks, write
from trainfit.accept.sandbox import Candidate, Limits, SandboxUnavailable, sandbox_status
from trainfit.accept.tasks import load_tasks

TASK = load_tasks()[0]
REASON = sandbox_status()
needs_jail = pytest.mark.skipif(REASON is not None, reason=f"no jail on this machine: {REASON}")

EXPECTED = {
    # held against the first sandbox and must keep holding
    "edit_tests": "0", "delete_tests": "0", "skip_markers": "0", "conftest_hook": "0",
    "monkeypatch_asserts": "0", "early_exit": "0", "fake_passed_prints": "0",
    "write_outside_abs": "rejected", "write_outside_dotdot": "rejected", "infinite_loop": "0", "fork_bomb": "0",
    "memory_bomb": "0", "network": "0", "kill_parent": "0", "read_hidden_tests": "0",
    # scored 1.0, escaped or outlived the first sandbox
    "read_package": "0", "write_tmp_shm": "0", "daemon": "0",
    # crashed the first grader
    "shape_write_tests_dir": "rejected", "shape_write_tests_dir_slash": "rejected", "shape_write_dot": "rejected",
    "shape_file_where_dir_expected": "rejected", "shape_overlong_name": "rejected",
    "shape_surrogate_content": "rejected", "shape_surrogate_path": "rejected", "shape_nul_in_path": "rejected",
    "shape_content_not_str": "rejected", "shape_path_not_str": "rejected", "shape_unknown_op": "rejected",
    "shape_unknown_key": "rejected", "shape_op_not_mapping": "rejected", "shape_delete_directory": "rejected",
    "shape_delete_missing": "rejected", "shape_too_deep": "rejected", "shape_too_many_ops": "rejected",
    "shape_too_large": "rejected",
}
MARKER_PATHS = [Path(d) / ATTACK_MARKER for d in ("/tmp", "/var/tmp", "/dev/shm")]


def _marked_processes(token: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and token.encode() in (p / "cmdline").read_bytes():
                out.append(int(p.name))
        except OSError:
            pass
    return out


def _grade_watching(ops, limits, token):
    """Grade while polling the host's process table for ``token``: (result, pids seen)."""
    seen, done = [], threading.Event()

    def watch():
        while not done.is_set():
            seen.extend(_marked_processes(token))
            time.sleep(0.01)

    t = threading.Thread(target=watch)
    t.start()
    try:
        return grade_patch(TASK, ops, limits), seen
    finally:
        done.set()
        t.join()


@pytest.fixture(scope="module")
def graded():
    """Grade every attack once (two at a time, as the calibration check does)."""
    for m in MARKER_PATHS:
        m.unlink(missing_ok=True)
    table = {**attacks(TASK), **more_attacks(TASK)}
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(table, pool.map(lambda ops: grade_patch(TASK, ops, CALIBRATION_LIMITS), table.values())))
    return results


def test_every_attack_has_an_expectation():
    assert set(EXPECTED) == set(attacks(TASK)) | set(more_attacks(TASK))
    assert not set(attacks(TASK)) & set(more_attacks(TASK))


@needs_jail
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_attack_outcome(graded, name):
    r = graded[name]
    assert r.reward == 0.0, (name, r)
    if EXPECTED[name] == "rejected":
        assert r.rejected and "\n" not in r.rejected, r
    else:
        assert r.rejected is None and r.report_found and r.grader_error is None, r


@needs_jail
def test_correct_patch_scores_one_and_shapes_are_rejected_even_next_to_it(graded):
    assert grade_patch(TASK, [write("solution.py", TASK.correct)], CALIBRATION_LIMITS).reward == 1.0
    assert all(graded[n].rejected for n in EXPECTED if n.startswith("shape_"))


def test_read_package_attack_is_real(tmp_path):
    """Unjailed, the package-reading completion finds the answer: what makes its 0 in the jail meaningful."""
    (tmp_path / "solution.py").write_text(attacks(TASK)["read_package"][0]["content"])
    code = "import solution; print(solution.clamp(-3, 0, 10), solution.clamp(12, 0, 10))"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, '.'); {code}"],
                         check=False, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["0", "10"], out.stderr


def test_hidden_parts_are_not_in_any_package_file():
    """The reference solutions and hidden tests ship sealed: no file of the package holds them in clear."""
    import trainfit

    texts = [p.read_bytes() for p in Path(trainfit.__file__).parent.rglob("*") if p.is_file()]
    for task in load_tasks():
        secrets = [task.correct, task.wrong, *[line for line in task.hidden_tests.splitlines() if "assert" in line]]
        for s in secrets:
            assert not any(s.strip().encode() in t for t in texts), (task.name, s)


@needs_jail
def test_tmp_and_shm_writes_stay_in_the_jail(graded):
    assert graded["write_tmp_shm"].reward == 0.0
    assert [m for m in MARKER_PATHS if m.exists()] == []


@needs_jail
def test_jail_shows_only_system_trees_the_workspace_and_empty_tmp(tmp_path):
    import trainfit
    from trainfit.accept.sandbox import _jail_plan

    ws = tmp_path / "ws"
    ws.mkdir()
    pkg = os.path.dirname(os.path.realpath(trainfit.__file__))
    (ws / "solution.py").write_text(
        "import os\n"
        "def view(paths):\n"
        "    return {'root': sorted(os.listdir('/')), 'tmp': os.listdir('/tmp'), 'shm': os.listdir('/dev/shm'),\n"
        "            'seen': [p for p in paths if os.path.exists(p)], 'pid': os.getpid(), 'uid': os.getuid(),\n"
        "            'pkg': os.listdir(paths[0]) if os.path.isdir(paths[0]) else None}\n")
    for p in (tmp_path, ws, ws / "solution.py"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    c = Candidate(ws, Limits(call_timeout_s=20))
    try:
        v = c.call("view", [pkg, str(ws), str(tmp_path), "/work", "/home", "/proc/1"])
    finally:
        c.close()
    tops = {p.split("/")[1] for p in _jail_plan().ro_dirs} | {link.split("/")[1] for link, _ in _jail_plan().links}
    assert set(v["root"]) <= tops | {"dev", "etc", "tmp", "var", "ws"}, v["root"]
    assert v["tmp"] == [] and v["shm"] == [] and v["pid"] == 2 and v["uid"] != 0
    assert v["seen"] in ([], [pkg]) and not v["pkg"], v  # the package is absent, or an empty mount


@needs_jail
def test_daemon_is_killed_with_its_grading_and_cannot_sabotage_the_next():
    """A double-forked, setsid daemon that kills every process it can see once grading is over (it made the
    next two correct patches score 0.0 in the first sandbox). It must exist while grading runs, be gone when
    ``grade`` returns, and the next two correct patches score 1.0."""
    token = f"trainfit-daemon-{uuid.uuid4().hex}"  # unique, so a concurrent run of this test cannot interfere
    ops = [write("solution.py", attacks(TASK)["daemon"][0]["content"].replace(ATTACK_MARKER, token))]
    r, seen = _grade_watching(ops, CALIBRATION_LIMITS, token)
    assert r.reward == 0.0 and r.grader_error is None, r
    assert seen, "the daemon never started: the test proves nothing"
    assert _marked_processes(token) == []
    for _ in range(2):
        assert grade_patch(TASK, [write("solution.py", TASK.correct)], CALIBRATION_LIMITS).reward == 1.0
    assert _marked_processes(token) == []


@needs_jail
def test_nothing_survives_a_grading_that_times_out(monkeypatch, tmp_path):
    """The grader's pytest is killed at run_timeout_s: the launcher still tears the namespace down, and no
    directory is left behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    token = f"trainfit-daemon-{uuid.uuid4().hex}"
    src = ("import posix, sys, time\n"
           "if posix.fork() == 0:\n"
           "    posix.setsid()\n"
           "    if posix.fork() == 0:\n"
           f"        posix.execv(sys.executable, [sys.executable, '-S', '-c', 'import time; time.sleep(60)', {token!r}])\n"
           "    posix._exit(0)\n"
           "def clamp(*a):\n    time.sleep(60)\n")
    t0 = time.perf_counter()
    r, seen = _grade_watching([write("solution.py", src)], Limits(call_timeout_s=30.0, run_timeout_s=2.0), token)
    assert seen, "the daemon never started: the test proves nothing"
    assert r.detail["test_inside"] == "missing" and not r.report_found  # pytest was killed mid-run
    assert r.reward == 0.0 and time.perf_counter() - t0 < 15
    assert _marked_processes(token) == []
    assert list(tmp_path.iterdir()) == []


def test_fails_closed_where_it_cannot_isolate():
    """Where the jail cannot be built, grading is refused with one line (here: without CAP_SYS_ADMIN)."""
    code = ("from trainfit.accept.reward import grade_patch, write\n"
            "from trainfit.accept.sandbox import SandboxUnavailable\n"
            "from trainfit.accept.tasks import load_tasks\n"
            "t = load_tasks()[0]\n"
            "try:\n"
            "    r = grade_patch(t, [write('solution.py', t.correct)])\n"
            "    print('GRADED', r.reward)\n"
            "except SandboxUnavailable as e:\n"
            "    print('REFUSED', e)\n")
    if REASON is not None:
        cmd = [sys.executable, "-c", code]
    elif os.geteuid() == 0 and shutil.which("setpriv"):
        cmd = ["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c", code]
    else:
        pytest.skip("the jail works here and there is no way to take it away (needs root and setpriv)")
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("REFUSED cannot isolate candidate code"), out.stdout + out.stderr
    assert "refusing to grade" in lines[0]


def test_fail_closed_runs_no_candidate_code(monkeypatch):
    from trainfit.accept import sandbox
    from trainfit.errors import TrainfitError

    monkeypatch.setattr(sandbox, "sandbox_status", lambda: "cannot isolate candidate code (test)")
    started = []
    monkeypatch.setattr(sandbox.subprocess, "Popen", lambda *a, **k: started.append(a))
    with pytest.raises(SandboxUnavailable, match="refusing to grade") as exc:
        grade_patch(TASK, [write("solution.py", TASK.correct)])
    assert started == [] and isinstance(exc.value, TrainfitError) and "\n" not in str(exc.value)


@needs_jail
def test_grading_leaves_no_temporary_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert grade_patch(TASK, [write("solution.py", TASK.correct)], CALIBRATION_LIMITS).reward == 1.0
    assert list(tmp_path.iterdir()) == []
