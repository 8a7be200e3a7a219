"""The default coding tasks. Each module holds the starting files, the hidden tests, and a correct
and a wrong patch (used only for reward calibration). Hidden tests call into the candidate through
the ``candidate`` fixture, so candidate code never runs inside the pytest process."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

_TASK_MODULES = ("clamp", "palindrome", "fizzbuzz", "word_count")
STUB = "def {fn}(*args):\n    raise NotImplementedError\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One small Python coding task."""

    name: str
    prompt: str
    files: dict[str, str]
    """Starting workspace: ``solution.py`` (a stub) and ``tests/test_visible.py``."""
    hidden_tests: str
    correct: str
    """A correct ``solution.py``."""
    wrong: str
    """A plausible but wrong ``solution.py`` (passes some hidden tests at most)."""

    @property
    def hidden_names(self) -> list[str]:
        return re.findall(r"^def (test_\w+)\(", self.hidden_tests, flags=re.M)


def load_tasks() -> list[Task]:
    out = []
    for mod_name in _TASK_MODULES:
        m = importlib.import_module(f"trainfit.accept.tasks.{mod_name}")
        files = {"solution.py": STUB.format(fn=m.FUNCTION), "tests/test_visible.py": m.VISIBLE_TESTS}
        out.append(Task(name=mod_name, prompt=m.PROMPT, files=files, hidden_tests=m.HIDDEN_TESTS,
                        correct=m.CORRECT, wrong=m.WRONG))
    return out


def split_tasks() -> tuple[list[Task], list[Task]]:
    """(train, held_out): the first two tasks train, the last two measure the baseline."""
    tasks = load_tasks()
    return tasks[:2], tasks[2:]
