"""The command registry: every command is listed by --help, a run imports only the command it invokes."""

import subprocess
import sys

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
