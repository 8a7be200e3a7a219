"""The README stays true: its setup commands, .ci/run, and the default plan output it shows."""

from pathlib import Path

from trainfit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _blocks():
    parts = README.split("```")
    return [parts[i].split("\n", 1)[1] for i in range(1, len(parts), 2)]


def test_two_setup_commands_and_ci_runs_the_second():
    setup, tests = _blocks()[0].strip(), _blocks()[1].strip()
    assert setup.endswith("trainfit plan") and "pip install" in setup
    assert tests.endswith("pytest -q") and "'.[test]'" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_readme_shows_the_current_default_plan(capsys):
    marker = "Output of `trainfit plan` on the default card:\n\n```\n"
    shown = README.split(marker, 1)[1].split("```", 1)[0]
    assert main(["plan"]) == 0
    assert capsys.readouterr().out == shown, "regenerate the README block: tools/update_readme.py"
