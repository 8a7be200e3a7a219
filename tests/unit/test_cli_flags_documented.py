"""Flags a review found in `--help` but in no doc: each is named in the docs page of its command, and `--debug`
(taken by every command, README "Bad input ...") is named in the root --help."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLAGS = [
    ("audit", "--no-torch", "docs/preflight.md"), ("audit", "--checkpoint-path", "docs/preflight.md"),
    ("audit", "--timeout", "docs/preflight.md"), ("check", "--timeout", "docs/preflight.md"),
    ("record", "--timeout", "docs/preflight.md"), ("compare", "--time-margin", "docs/watch.md"),
    ("compare", "--memory-margin", "docs/watch.md"), ("accept", "--engine", "docs/watch.md"),
    ("accept", "--nproc", "docs/watch.md"), ("accept", "--plan-check/--no-plan-check", "docs/watch.md"),
    ("size", "--kv-dtype", "README.md"), ("trace", "--layers", "README.md"),
    ("size", "--batch", "README.md"), ("calibrate", "--dry-run", "docs/calibration.md"),
]


def _help(*command: str) -> str:
    env = dict(os.environ, COLUMNS="250", NO_COLOR="1")
    p = subprocess.run([sys.executable, "-m", "trainfit", *command, "--help"], capture_output=True, text=True, env=env,
                       check=True, timeout=120)
    return p.stdout


@pytest.mark.parametrize(("command", "flag", "doc"), FLAGS)
def test_flag_is_in_the_help_and_in_its_doc(command, flag, doc):
    out = _help(command)
    assert flag.split("/")[0] in out, f"{command} --help has no {flag}"
    text = ROOT.joinpath(doc).read_text()
    assert f"`{flag}" in text or f"trainfit {command} " in text and f" {flag} " in text, f"{doc} lacks {command}'s {flag}"


def test_root_help_names_debug():
    out = _help()
    assert "--debug" in out
