"""Unit tests for the coding-task grader: patch checks, restored tests, the TRL signature, the jail.

The attack table (every attack with its expected score) is ``test_sandbox_attacks.py``."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainfit.accept.checks import CALIBRATION_LIMITS
from trainfit.accept.reward import CodingReward, attacks, grade_patch, write
from trainfit.accept.sandbox import (
    PatchRejected,
    _restore_tests,
    apply_patch,
    isolation_warnings,
    sandbox_status,
)
from trainfit.accept.tasks import load_tasks, seal, sealed_path, unseal

TASK = load_tasks()[0]
REASON = sandbox_status()
needs_jail = pytest.mark.skipif(REASON is not None, reason=f"no jail on this machine: {REASON}")


@needs_jail
def test_correct_patch_full_reward_and_fork_bomb_bounded():
    assert grade_patch(TASK, [write("solution.py", TASK.correct)]).reward == 1.0
    r = grade_patch(TASK, attacks(TASK)["fork_bomb"], CALIBRATION_LIMITS)
    assert r.wall_s < 10 and r.grader_error is None  # grade waited for the namespace to empty, in time


@needs_jail
def test_correct_fix_plus_test_edit_is_graded_on_restored_tests():
    ops = [write("solution.py", TASK.correct), write("tests/test_visible.py", "def test_x():\n    assert 0\n")]
    assert grade_patch(TASK, ops).reward == 1.0


@pytest.mark.parametrize("path", ["/etc/passwd", "../x.py", "a/../../x.py", "~/.bashrc", ""])
def test_path_checks(tmp_path, path):
    with pytest.raises(PatchRejected):
        apply_patch(tmp_path, [write(path, "x")])


def test_symlink_leaving_workspace_is_rejected(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out").symlink_to(tmp_path)
    with pytest.raises(PatchRejected):
        apply_patch(ws, [write("out/evil.py", "x")])
    assert not (tmp_path / "evil.py").exists()


def test_rejection_is_all_or_nothing(tmp_path):
    with pytest.raises(PatchRejected):
        apply_patch(tmp_path, [write("solution.py", "x"), write("/tmp/y", "x")])
    assert not (tmp_path / "solution.py").exists()


@needs_jail
def test_reward_function_trl_signature():
    fn = CodingReward([TASK], CALIBRATION_LIMITS)
    out = fn(prompts=["p", "p"], completions=["PASSED", ""], task=[TASK.name, TASK.name],
             patch=[[write("solution.py", TASK.correct)], []])
    assert out == [1.0, 0.0]


@pytest.mark.skipif(os.geteuid() != 0, reason="the jail needs root or user namespaces; checked as root")
def test_no_degradation_as_root():
    assert isolation_warnings() == []


@needs_jail
def test_network_is_unreachable_from_candidate():
    src = ("import socket\n"
           "def clamp(*a):\n"
           "    s = socket.socket(); s.settimeout(0.5)\n"
           "    try:\n        s.connect(('1.1.1.1', 53)); return 'net'\n"
           "    except OSError as e:\n        return str(e)\n")
    import pathlib
    import tempfile

    from trainfit.accept.sandbox import Candidate
    d = pathlib.Path(tempfile.mkdtemp())
    os.chmod(d, 0o755)
    (d / "solution.py").write_text(src)
    os.chmod(d / "solution.py", 0o644)
    c = Candidate(d)
    try:
        assert c.call("clamp") != "net"
    finally:
        c.close()


@needs_jail
def test_grader_imports_trainfit_from_a_source_checkout(tmp_path):
    """Found on a GPU machine: run from a checkout with ``PYTHONPATH=src`` (not installed), the grader's
    clean environment could not import trainfit, so every patch, correct ones too, scored 0."""
    import site
    import sys
    from pathlib import Path

    import trainfit

    src = Path(trainfit.__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    # the test venv's packages as a plain path: pytest is importable, the editable trainfit finder is not
    purelib = [p for p in site.getsitepackages() if p.endswith("site-packages")][0]
    newpy = tmp_path / "v" / "bin" / "python"
    (next((tmp_path / "v" / "lib").glob("python3*")) / "site-packages" / "deps.pth").write_text(purelib + "\n")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a checkout's src on the caller's path
    probe = subprocess.run([str(newpy), "-c", "import trainfit"], capture_output=True, env=clean)
    assert probe.returncode != 0  # trainfit is not installed in this interpreter
    code = ("from trainfit.accept.reward import grade_patch, write; from trainfit.accept.tasks import load_tasks;"
            "t = load_tasks()[0]; r = grade_patch(t, [write('solution.py', t.correct)]);"
            "print(r.reward, r.grader_error)")
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([str(newpy), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split()[0] == "1.0", out.stdout + out.stderr


_names = st.sampled_from(["solution.py", "tests", "tests/test_visible.py", "conftest.py", "x.pth", ".", "a",
                          "a/b.py", "solution.py/x", "", "..", "/abs", "~u", "x\udcff", "n\x00", "d" * 300,
                          "tests/", "./solution.py", "a//b", "sitecustomize.py/y"])
_paths = st.one_of(_names, st.lists(_names, min_size=1, max_size=4).map("/".join), st.integers(), st.none())
_ops = st.one_of(
    st.fixed_dictionaries({"op": st.sampled_from(["write", "delete", "chmod", None]), "path": _paths},
                          optional={"content": st.one_of(st.text(max_size=20), st.binary(max_size=4), st.integers()),
                                    "mode": st.integers()}),
    st.text(max_size=5), st.integers(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(_ops, max_size=6), _ops, st.none()))
def test_any_patch_applies_or_is_rejected_with_a_reason(ops):
    """Every patch shape either applies (then the files hold what it wrote) or raises ``PatchRejected`` with a
    one-line reason, all or nothing; restoring the tests afterwards never fails either."""
    with tempfile.TemporaryDirectory() as d:
        ws = Path(d) / "ws"
        for rel, text in TASK.files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        before = sorted((p.relative_to(ws).as_posix(), p.is_dir()) for p in ws.rglob("*"))
        try:
            apply_patch(ws, ops)
        except PatchRejected as exc:
            assert str(exc) and "\n" not in str(exc)
            assert sorted((p.relative_to(ws).as_posix(), p.is_dir()) for p in ws.rglob("*")) == before
            return
        final = {}
        for op in ops:
            rel = Path(op["path"]).as_posix()
            final[rel] = op.get("content", "") if op["op"] == "write" else None
        for rel, content in final.items():
            assert (ws / rel).read_text() == content if content is not None else not (ws / rel).exists()
        _restore_tests(ws, TASK.files)
        assert (ws / "tests/test_visible.py").read_text() == TASK.files["tests/test_visible.py"]
        assert not any(p.name in ("conftest.py", "sitecustomize.py") or p.suffix == ".pth" for p in ws.rglob("*"))


def test_seal_round_trip_and_tamper_detection():
    hidden = unseal(sealed_path().read_bytes())
    assert {t.name for t in load_tasks()} == set(hidden)
    blob = seal(hidden)
    assert unseal(blob) == hidden and blob != seal(hidden)  # a fresh nonce each time
    assert TASK.correct.encode() not in blob
    flipped = bytearray(blob)
    flipped[-1] ^= 1
    with pytest.raises(ValueError, match="corrupt"):
        unseal(bytes(flipped))
    with pytest.raises(ValueError, match="exactly"):
        seal({"t": {"correct": "x"}})


def test_vault_opens_the_sealed_file(tmp_path):
    from trainfit.accept.tasks.vault import main

    assert main(["open", str(tmp_path / "h.json")]) == 0
    import json

    assert json.loads((tmp_path / "h.json").read_text())[TASK.name]["correct"] == TASK.correct
    assert main(["close", str(tmp_path / "missing.json")]) == 2


@needs_jail
def test_package_is_covered_where_it_sits_inside_a_mounted_tree(monkeypatch, tmp_path):
    """Installed into the interpreter's own prefix, trainfit would be inside a read-only tree the jail shows:
    the empty mount over it must hide the package and the sealed tasks."""
    import dataclasses

    import trainfit
    from trainfit.accept import sandbox

    pkg = os.path.dirname(os.path.realpath(trainfit.__file__))
    if any(pkg.startswith(t + "/") for t in ("/tmp", "/var/tmp", "/dev/shm")):
        pytest.skip("the checkout sits under /tmp, which the jail replaces with its own empty tmpfs")
    plan = sandbox._jail_plan()
    monkeypatch.setattr(sandbox, "_jail_plan",
                        lambda: dataclasses.replace(plan, ro_dirs=(*plan.ro_dirs, os.path.dirname(pkg))))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(
        "import os\n"
        "def look(pkg):\n"
        "    return [os.path.isdir(os.path.dirname(pkg)), os.listdir(pkg),\n"
        "            os.path.exists(pkg + '/accept/tasks/hidden.sealed')]\n")
    for p in (tmp_path, ws, ws / "solution.py"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    c = sandbox.Candidate(ws, sandbox.Limits(call_timeout_s=20))
    try:
        assert c.call("look", pkg) == [True, [], False]
    finally:
        c.close()
