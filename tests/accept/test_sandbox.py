"""Security tests for the coding-task reward: every attack scores 0, and the grader's isolation holds."""

import os
import subprocess

import pytest

from trainfit.accept.reward import CodingReward, attacks, grade_patch, write
from trainfit.accept.sandbox import PatchRejected, apply_patch, isolation_warnings
from trainfit.accept.tasks import load_tasks
from trainfit.accept.checks import CALIBRATION_LIMITS

TASK = load_tasks()[0]


@pytest.mark.parametrize("attack", sorted(attacks(TASK)))
def test_attack_scores_zero(attack):
    r = grade_patch(TASK, attacks(TASK)[attack], CALIBRATION_LIMITS)
    assert r.reward == 0.0, r


def test_correct_patch_full_reward_and_no_stray_processes():
    assert grade_patch(TASK, [write("solution.py", TASK.correct)]).reward == 1.0
    r = grade_patch(TASK, attacks(TASK)["fork_bomb"], CALIBRATION_LIMITS)
    assert r.wall_s < 10
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "python3 -I -c" not in out  # the worker's whole process group is gone


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


def test_reward_function_trl_signature():
    fn = CodingReward([TASK], CALIBRATION_LIMITS)
    out = fn(prompts=["p", "p"], completions=["PASSED", ""], task=[TASK.name, TASK.name],
             patch=[[write("solution.py", TASK.correct)], []])
    assert out == [1.0, 0.0]


@pytest.mark.skipif(os.geteuid() != 0, reason="isolation is degraded without root")
def test_no_degradation_as_root():
    assert isolation_warnings() == []


def test_network_is_unreachable_from_candidate():
    src = ("import socket\n"
           "def clamp(*a):\n"
           "    s = socket.socket(); s.settimeout(0.5)\n"
           "    try:\n        s.connect(('1.1.1.1', 53)); return 'net'\n"
           "    except OSError as e:\n        return str(e)\n")
    from trainfit.accept.sandbox import Candidate
    import tempfile, pathlib
    d = pathlib.Path(tempfile.mkdtemp())
    os.chmod(d, 0o755)
    (d / "solution.py").write_text(src)
    os.chmod(d / "solution.py", 0o644)
    c = Candidate(d)
    try:
        assert c.call("clamp") != "net"
    finally:
        c.close()


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
    probe = subprocess.run([str(newpy), "-c", "import trainfit"], capture_output=True)
    assert probe.returncode != 0  # trainfit is not installed in this interpreter
    code = ("from trainfit.accept.reward import grade_patch, write; from trainfit.accept.tasks import load_tasks;"
            "t = load_tasks()[0]; r = grade_patch(t, [write('solution.py', t.correct)]);"
            "print(r.reward, r.grader_error)")
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([str(newpy), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split()[0] == "1.0", out.stdout + out.stderr
