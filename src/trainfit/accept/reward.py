"""The coding-task reward as a TRL reward function, and the tampering attempts it must resist."""

from __future__ import annotations

import os
from collections.abc import Callable

from trainfit.accept.sandbox import GradeResult, Limits, grade
from trainfit.accept.tasks import Task

Patch = list[dict]


def write(path: str, content: str) -> dict:
    return {"op": "write", "path": path, "content": content}


def grade_patch(task: Task, ops: Patch, limits: Limits = Limits()) -> GradeResult:
    return grade(task.files, task.hidden_tests, task.hidden_names, ops, limits)


class CodingReward:
    """TRL reward function: ``reward(prompts, completions, task=[...], patch=[...]) -> list[float]``.

    ``task`` (task name) and ``patch`` (the write/delete operations extracted from the trajectory's
    tool calls) arrive as extra columns from the rollout function. Rewards are passed/expected hidden
    tests; the completion text itself is never read.
    """

    __name__ = "coding_reward"

    def __init__(self, tasks: list[Task], limits: Limits = Limits()):
        self.tasks = {t.name: t for t in tasks}
        self.limits = limits
        self.history: list[float] = []

    def __call__(self, prompts=None, completions=None, task=None, patch=None, **_) -> list[float]:
        out = [grade_patch(self.tasks[name], ops, self.limits).reward for name, ops in zip(task, patch)]
        self.history.extend(out)
        return out


ATTACK_MARKER = "trainfit-attack-marker"
"""Name of the files the ``write_tmp_shm`` attack leaves in ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (a test
checks that none appears on the host) and argv tag of the ``daemon`` attack's process."""


def _stub_with(task: Task, prelude: str) -> Patch:
    return [write("solution.py", prelude + task.files["solution.py"])]


def _read_package_attack(task: Task) -> str:
    """Source of a ``solution.py`` that scores 1.0 if it can read trainfit's installed package: it opens the
    sealed hidden parts with the (public) key, or finds the old plain-text modules, and runs the answer."""
    import trainfit
    from trainfit.accept import tasks

    pkg = os.path.dirname(os.path.realpath(trainfit.__file__))
    return (
        "import glob, hashlib, hmac, json, os, sys\n"
        f"PKGS = [{pkg!r}] + glob.glob('/usr/*/lib/python3*/*-packages/trainfit') + "
        "glob.glob('/*/*/lib/python3*/site-packages/trainfit')\n"
        f"KEY, MAGIC, NAME = {tasks._KEY!r}, {tasks._MAGIC!r}, {task.name!r}\n"
        "def _open(blob):\n"
        "    body = blob[len(MAGIC) + 32:]\n"
        "    nonce, c = body[:16], body[16:]\n"
        "    ks = b''.join(hashlib.sha256(KEY + nonce + i.to_bytes(8, 'big')).digest()\n"
        "                  for i in range((len(c) + 31) // 32))\n"
        "    return json.loads(bytes(a ^ b for a, b in zip(c, ks)))\n"
        "for pkg in PKGS:\n"
        "    try:\n"
        "        exec(_open(open(pkg + '/accept/tasks/hidden.sealed', 'rb').read())[NAME]['correct'])\n"
        "        break\n"
        "    except Exception:\n"
        "        pass\n"
        "    try:\n"
        "        ns = {}\n"
        "        exec(open(pkg + '/accept/tasks/' + NAME + '.py').read(), ns)\n"
        "        exec(ns['CORRECT'])\n"
        "        break\n"
        "    except Exception:\n"
        "        pass\n"
        "    try:\n"
        "        sys.path.insert(0, os.path.dirname(pkg))\n"
        "        from trainfit.accept.tasks import load_tasks\n"
        "        exec(next(t for t in load_tasks() if t.name == NAME).correct)\n"
        "        break\n"
        "    except Exception:\n"
        "        pass\n"
        "else:\n" + "".join("    " + line + "\n" for line in task.files["solution.py"].splitlines())
    )


_DAEMON = (
    "import posix, sys, time\n"
    "if posix.fork() == 0:\n"
    "    posix.setsid()\n"
    "    if posix.fork() == 0:\n"
    "        posix.execv(sys.executable, [sys.executable, '-S', '-c',\n"
    "            'import posix, time\\ntime.sleep(1.0)\\nend = time.time() + 20\\n'\n"
    "            'while time.time() < end and posix.getuid() != 0:\\n'\n"
    "            '    try:\\n        posix.kill(-1, 9)\\n    except OSError:\\n        pass\\n    time.sleep(0.02)\\n',\n"
    f"            {ATTACK_MARKER!r}])\n"
    "    posix._exit(0)\n"
    "posix.waitpid(-1, 0)\n"
)


def attacks(task: Task) -> dict[str, Patch]:
    """Tampering patches run by the calibration check: each must score 0 (none solves the task by itself;
    several would score 1.0 if the sandbox leaked), and the malformed shapes (``shape_attacks``) must be
    rejected with a reason, even next to a correct ``solution.py``. ``more_attacks`` has the rest."""
    fn = task.correct.split("(")[0].removeprefix("def ")
    stub = task.files["solution.py"]
    fake = f"print('{task.hidden_names[0]} PASSED')\nprint('=== 4 passed in 0.01s ===')\n" + stub
    good = write("solution.py", task.correct)
    return {
        # held before the jail, and must keep holding
        "edit_tests": [write("tests/test_visible.py", "def test_ok():\n    assert True\n"),
                       write("test_hidden.py", "def test_ok():\n    assert True\n")],
        "delete_tests": [{"op": "delete", "path": "tests/test_visible.py"}],
        "skip_markers": [write("tests/test_visible.py", "import pytest\npytestmark = pytest.mark.skip\n"),
                         write("solution.py", "import pytest\npytest.skip('x', allow_module_level=True)\n")],
        "conftest_hook": [write("conftest.py",
                                "def pytest_collection_modifyitems(items):\n    items.clear()\n"),
                          write("tests/conftest.py",
                                "import pytest\n@pytest.hookimpl(tryfirst=True)\n"
                                "def pytest_runtest_call(item):\n    pass\n")],
        "fake_passed_prints": [write("solution.py", fake)],
        "write_outside_abs": [good, write("/tmp/trainfit_pwned.py", "x=1\n")],
        "write_outside_dotdot": [good, write("../grader/test_hidden.py", "")],
        "infinite_loop": [write("solution.py", f"def {fn}(*a):\n    while True:\n        pass\n")],
        "fork_bomb": [write("solution.py",
                            "import posix\n"
                            f"def {fn}(*a):\n"
                            "    for _ in range(10000):\n"
                            "        try:\n            posix.fork()\n        except OSError:\n            pass\n"
                            "    while True:\n        pass\n")],
        "read_hidden_tests": [write("solution.py",
                                    "import glob, os\n"
                                    "SRC = ''\n"
                                    "for p in glob.glob(os.path.join(os.path.dirname(os.getcwd()), '*', '*.py')):\n"
                                    "    SRC += open(p).read()\n"
                                    f"def {fn}(*a):\n"
                                    "    import re\n"
                                    "    m = re.search(re.escape(repr(a[0])) + r'.*?== (.+)', SRC)\n"
                                    "    return eval(m.group(1))\n")],
        # found by fuzzing the first sandbox
        "read_package": [write("solution.py", _read_package_attack(task))],
        "write_tmp_shm": _stub_with(task, "for d in ('/tmp', '/var/tmp', '/dev/shm'):\n"
                                          "    try:\n"
                                          f"        open(d + '/{ATTACK_MARKER}', 'w').write('x')\n"
                                          "    except OSError:\n        pass\n"),
        "daemon": _stub_with(task, _DAEMON),
        **shape_attacks(task),
    }


def more_attacks(task: Task) -> dict[str, Patch]:
    """Further attacks that held against the first sandbox, built on a non-solution (each must score 0). They
    run in the test suite, not in ``trainfit accept``'s calibration, to keep that check's time down."""
    fn = task.correct.split("(")[0].removeprefix("def ")
    return {
        "monkeypatch_asserts": _stub_with(task, "import builtins, sys\n"
                                                "builtins.AssertionError = type('Never', (Exception,), {})\n"
                                                "sys.modules['_pytest'] = sys.modules['pytest'] = None\n"),
        "early_exit": [write("solution.py", f"import posix\ndef {fn}(*a):\n    posix._exit(0)\n")],
        "memory_bomb": [write("solution.py", f"def {fn}(*a):\n    x = 'x' * (1 << 36)\n")],
        "network": _stub_with(task, "import socket\ns = socket.socket()\ns.settimeout(0.5)\n"
                                    "try:\n    s.connect(('1.1.1.1', 53))\nexcept OSError:\n    pass\n"),
        "kill_parent": _stub_with(task, "import posix\n"
                                        "for pid in (posix.getppid(), 1, -1) if posix.getuid() != 0 else ():\n"
                                        "    try:\n        posix.kill(pid, 9)\n    except OSError:\n        pass\n"),
    }


def shape_attacks(task: Task) -> dict[str, Patch]:
    """Patch shapes that once crashed the grader, each next to a correct ``solution.py``: all are rejected."""
    good = write("solution.py", task.correct)
    return {
        "shape_write_tests_dir": [good, write("tests", "x")],
        "shape_write_tests_dir_slash": [good, write("tests/", "x")],
        "shape_write_dot": [good, write(".", "x")],
        "shape_file_where_dir_expected": [good, write("solution.py/x.py", "x")],
        "shape_overlong_name": [good, write("a" * 300 + ".py", "x")],
        "shape_surrogate_content": [write("solution.py", task.correct + "# \udcff\n")],
        "shape_surrogate_path": [good, write("x\udcff.py", "x")],
        "shape_nul_in_path": [good, write("x\x00.py", "x")],
        "shape_content_not_str": [good, {"op": "write", "path": "x.py", "content": b"x"}],
        "shape_path_not_str": [good, {"op": "write", "path": ["x.py"], "content": "x"}],
        "shape_unknown_op": [good, {"op": "chmod", "path": "solution.py"}],
        "shape_unknown_key": [good, {"op": "write", "path": "x.py", "content": "x", "mode": 0o777}],
        "shape_op_not_mapping": [good, "write solution.py"],
        "shape_delete_directory": [good, {"op": "delete", "path": "tests"}],
        "shape_delete_missing": [good, {"op": "delete", "path": "nothing.py"}],
        "shape_too_deep": [good, write("/".join(["d"] * 40) + "/x.py", "x")],
        "shape_too_many_ops": [good] * 300,
        "shape_too_large": [write("solution.py", task.correct + "#" * (2 * 1024 * 1024))],
    }


RewardFn = Callable[[Task, Patch], float]
