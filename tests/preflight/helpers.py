"""A local CLI app with the four pre-flight commands, and an invoke that maps errors like cli.main."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from typer.testing import CliRunner

from trainfit.cli import audit_cmd, check_cmd, diagnose_cmd, record_cmd
from trainfit.errors import TrainfitError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("audit")(audit_cmd.audit)
app.command("check")(check_cmd.check)
app.command("record")(record_cmd.record)
app.command("diagnose")(diagnose_cmd.diagnose)


@dataclass
class Result:
    exit_code: int
    output: str
    error: str


def invoke(*args: str, input: str | None = None) -> Result:
    """Run a command; a TrainfitError becomes exit 2 and one line, as in trainfit.cli.main."""
    res = CliRunner().invoke(app, [str(a) for a in args], input=input)
    if isinstance(res.exception, TrainfitError):
        return Result(2, res.stdout, str(res.exception))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return Result(res.exit_code, res.stdout, "")


def write_card(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
