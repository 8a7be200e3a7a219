"""The command registry: every command is listed by --help, a run imports only the command it invokes."""

import subprocess
import sys

import pytest

from trainfit.cli.main import COMMANDS, command_function, main


def test_every_registered_command_resolves_to_a_function_with_a_docstring():
    for name in COMMANDS:
        fn = command_function(name)
        assert callable(fn) and (fn.__doc__ or "").strip(), name


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f" {name} " in out, name


def test_unknown_command_is_a_usage_error_with_a_suggestion(capsys):
    assert main(["plna"]) == 2
    assert "Did you mean 'plan'?" in capsys.readouterr().err


def test_plan_imports_no_other_command_module_and_no_torch():
    code = (
        "import sys, io, contextlib\n"
        "from trainfit.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['plan', '--json']) == 0\n"
        "cmds = sorted(m for m in sys.modules if m.startswith('trainfit.cli.') and m.endswith('_cmd'))\n"
        "assert cmds == ['trainfit.cli.plan_cmd'], cmds\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_cold_plan_cpu_time_is_under_half_a_second():
    """CPU seconds (user + system) of a new `trainfit plan --json` process: the wall clock of a shared CI
    machine measures its neighbours; benchmarks/speed.py records both."""
    import os
    import resource
    import statistics

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, "-c", "import sys; from trainfit.cli.main import main; sys.exit(main())", "plan", "--json"]
    subprocess.run(cmd, capture_output=True, check=True, env=env)  # writes the bytecode
    cpu = []
    for _ in range(5):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    assert statistics.median(cpu) < 0.5, cpu
