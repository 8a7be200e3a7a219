"""trainfit.cli.fast: a plain argv of a FAST command calls the command with exactly the keyword arguments
typer would (same values, same types), and every other argv is left to typer."""

from __future__ import annotations

import functools
import io
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainfit.cli import fast
from trainfit.cli import main as cli_main
from trainfit.cli.main import FAST, command_function, main


def _typer_command(name: str, calls: list[dict]):
    """The click command typer builds for ``name``, calling a spy with the command's signature."""
    from typer.core import DEFAULT_MARKUP_MODE
    from typer.main import get_command_from_info
    from typer.models import CommandInfo

    fn = command_function(name)
    spy = functools.wraps(fn)(lambda **kwargs: calls.append(kwargs))
    return get_command_from_info(CommandInfo(name=name, callback=spy), pretty_exceptions_short=True,
                                 rich_markup_mode=DEFAULT_MARKUP_MODE)


def _typer_kwargs(name: str, argv: list[str]) -> dict | None:
    """What typer calls the command with for ``argv``, or None where typer refuses it (a usage error, --help)."""
    try:
        from typer._click.exceptions import ClickException  # typer >= 0.25 vendors click
    except ImportError:
        from click.exceptions import ClickException

    calls: list[dict] = []
    cmd = _typer_command(name, calls)
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            cmd.main(args=list(argv), prog_name=f"trainfit {name}", standalone_mode=False)
    except ClickException:  # a usage error
        return None
    return calls[0] if calls else None


def _typed(kwargs: dict) -> dict:
    return {k: (type(v), v) for k, v in kwargs.items()}  # 1 == True and 8 == 8.0: compare the types too


@pytest.mark.parametrize("name", sorted(FAST))
def test_every_fast_command_is_read_without_typer_and_knows_every_option(name):
    spec = fast._spec(command_function(name))
    assert spec is not None, f"{name}: a parameter the fast parser does not read (see trainfit.cli.fast)"
    cmd = _typer_command(name, [])
    words = {w for p in cmd.params if p.param_type_name == "option" for w in (*p.opts, *p.secondary_opts)}
    assert set(spec[1]) == words - {"--help"}


CASES = {
    "plan": [
        [], ["--json"], ["card.yaml"], ["card.yaml", "--json"], ["--json", "card.yaml"],
        ["--model", "Qwen/Qwen3.5-27B", "--scope", "qlora", "--gpu", "rtx4090", "--gpus", "4", "--seq", "4096"],
        ["--set", "loss.chunked=true", "--set", "model={params: 27e9}", "--json"],
        ["--method", "ppo", "--preset", "verl", "--gpus", "8", "--gpu", "a100-80gb"],
        ["--ckpt"], ["--no-ckpt", "--mbs", "2", "--grad-accum", "0", "--nodes", "2"],
        ["--html", "out.html", "--calibration", "cal.json", "--strategy", "zero3", "--offload", "optimizer",
         "--attention", "flash"],
    ],
    "size": [["Qwen/Qwen3.5-27B"], ["x", "--tokens", "8192", "--batch", "4", "--gpu", "rtx4090", "--kv-dtype", "fp8",
                                   "--json"]],
}
REFUSED = {
    "plan": [["--help"], ["--gpus", "abc"], ["--gpus", "-1"], ["--gpus", "08"], ["--gpus", "+8"], ["--gpus", "８"],
             ["--gpus=8"], ["--bogus"], ["a", "b"], ["--model"], ["--model", ""], ["--", "x"], ["-"], ["--json", "--json"],
             ["--ckpt", "--no-ckpt"], ["--gpus", "4", "--gpus", "8"], ["--model", "\udcff"]],
    "size": [[], ["--json"], ["x", "--tokens", "1e3"]],
}


@pytest.mark.parametrize("name,argv", [(n, a) for n in sorted(CASES) for a in CASES[n]])
def test_plain_argv_gives_typers_keyword_arguments(name, argv):
    mine = fast.parse(command_function(name), argv)
    assert mine is not None
    assert _typed(mine) == _typed(_typer_kwargs(name, argv))


@pytest.mark.parametrize("name,argv", [(n, a) for n in sorted(REFUSED) for a in REFUSED[n]])
def test_anything_else_is_left_to_typer(name, argv):
    assert fast.parse(command_function(name), argv) is None


def _words(name: str) -> list[str]:
    cmd = _typer_command(name, [])
    return sorted({w for p in cmd.params for w in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
                   if w.startswith("-")})


VALUES = ["8", "0", "07", "-1", "", "x", "a=b", "Qwen/Qwen3-8B", "card.yaml", "--", "-", "1e3", " 8", "+8", "٣",
          "--json=1", "--gpus=4", "--help", "é", "2" * 19]


@pytest.mark.parametrize("name", sorted(FAST))
def test_random_argv_fast_equals_typer(name):
    pool = _words(name) + VALUES

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.sampled_from(pool), max_size=8))
    def check(argv):
        mine = fast.parse(command_function(name), argv)
        if mine is not None:  # when fast parses, typer parses too, to the same arguments
            theirs = _typer_kwargs(name, argv)
            assert theirs is not None, argv
            assert _typed(mine) == _typed(theirs), argv

    check()


@pytest.mark.parametrize("argv", [["plan", "--json"], ["plan"], ["plan", "--gpus", "4", "--set", "loss.chunked=true"],
                                  ["plan", "--scope", "nope"], ["size", "Qwen/Qwen3-8B", "--json"]])
def test_main_prints_what_the_typer_path_prints(argv, capsys, monkeypatch):
    assert fast.parse(command_function(argv[0]), argv[1:]) is not None
    rc = main(list(argv))
    out, err = capsys.readouterr()
    monkeypatch.setattr(cli_main, "FAST", frozenset())  # every command through typer
    assert (rc, out, err) == (main(list(argv)), *capsys.readouterr())


def test_a_command_module_in_fast_does_not_import_typer():
    import subprocess
    import sys

    code = ("import sys\nimport trainfit.cli.plan_cmd, trainfit.cli.size_cmd\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click'))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_lazy_typer_stand_in_is_the_real_module():
    import typer

    assert fast.typer.Option is typer.Option and fast.typer.Exit is typer.Exit
