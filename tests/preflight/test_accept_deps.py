"""`accept` dependencies and failure output (issue 14, deliverable 7): the 'accept' extra installs every
module `trainfit accept` imports or runs, and a failing check prints its cause first, in one line.

(Placed here with the other pre-flight commands' tests; it needs neither torch nor TRL.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import typer
from typer.testing import CliRunner

from trainfit.accept.checks import CheckResult, check_calibration, one_line
from trainfit.cli import accept_cmd
from trainfit.errors import TrainfitError

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DISTRIBUTION = {"torch": "torch", "transformers": "transformers", "peft": "peft", "accelerate": "accelerate",
                "trl": "trl", "pytest": "pytest"}


def extra_requirements(name: str) -> set[str]:
    """Distribution names an extra installs, following 'trainfit[...]' self-references."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    out: set[str] = set()
    for req in extras[name]:
        m = re.match(r"trainfit\[(\w+)\]", req)
        if m:
            out |= extra_requirements(m.group(1))
        else:
            out.add(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower())
    return out


def test_accept_extra_installs_every_module_accept_needs():
    have = extra_requirements("accept")
    assert set(accept_cmd.ACCEPT_MODULES) == set(DISTRIBUTION)
    assert {DISTRIBUTION[m] for m in accept_cmd.ACCEPT_MODULES} <= have, have
    assert "pytest" in have  # the reward grader runs pytest: the three failing checks


GRADER_TRACEBACK = ("Traceback (most recent call last):\n  File \"<frozen runpy>\", line 189, in _run_module_as_main\n"
                    "ModuleNotFoundError: No module named 'pytest'\n")


def test_calibration_without_pytest_names_the_cause_first():
    """The grader cannot run pytest: every grade is 0 with a grader error; the cause is that error's line."""
    def grade(task, ops, limits=None):
        return SimpleNamespace(reward=0.0, grader_error=GRADER_TRACEBACK)

    r = check_calibration(grade=grade)
    assert r.status == "fail"
    assert r.cause == "the grader wrote no report: ModuleNotFoundError: No module named 'pytest'"
    text = accept_cmd.check_lines(r.to_dict())
    first, *rest = text.splitlines()
    assert first == "FAIL    reward_calibration: the grader wrote no report: ModuleNotFoundError: No module named 'pytest'"
    assert rest[0].startswith("        evidence: correct/wrong/empty:")


def test_every_failing_check_has_a_one_line_cause():
    r = CheckResult("resume", "fail", "fresh process failed: line one\nline two", "", "")
    assert r.cause == "fresh process failed: line one" and "\n" not in r.cause
    long = CheckResult("x", "fail", "e", "", "", "word " * 200)
    assert len(long.cause) <= 300 and "\n" not in long.cause
    assert CheckResult("x", "pass", "fine", "p", "n").cause == ""
    assert one_line("a\n\n  b   c  \n") == "b c"
    assert one_line(GRADER_TRACEBACK + "\nsome trailing note\n") == "ModuleNotFoundError: No module named 'pytest'"
    text = accept_cmd.check_lines(CheckResult("update", "pass", "loss 0.1", "proves", "not").to_dict())
    assert text.splitlines()[0] == "PASS    update: loss 0.1"


def test_missing_module_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "pytest" else real(m, *a))
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("accept")(accept_cmd.accept)
    app.command("noop")(lambda: None)
    res = CliRunner().invoke(app, ["accept"])
    assert isinstance(res.exception, TrainfitError)
    msg = str(res.exception)
    assert msg.startswith("accept: missing pytest: install the 'accept' extra") and "\n" not in msg
