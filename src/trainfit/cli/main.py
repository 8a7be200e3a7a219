"""trainfit's command line. Thin: parse, build the spec, call the core, render.

Commands are registered by name in ``COMMANDS`` and imported lazily: a run imports and builds (typer's
parameter parsing) only the command it invokes, so the cold ``trainfit plan`` does not pay for ``trace``,
``serve`` or ``accept``. ``trainfit --help`` still lists every command (it builds them all).

The commands in ``FAST`` skip typer itself when their argv is plain long options and words
(``trainfit.cli.fast``: the same keyword arguments, without importing typer, click or pydantic's type
adapters); any other argv goes through typer, which owns every usage error and ``--help``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

HELP = ("Will this LLM post-training run fit, on how many cards of which kind, at what cost?\n\n"
        "Bad input is one line and exit code 2; --debug (anywhere on the command line) shows the traceback instead.")

# Command name -> "module:function" (a plain typer command function). The order here is the order of
# `trainfit --help`. To register a command, add ONE line, e.g.
#     "import": "trainfit.cli.import_cmd:import_",
# and nothing else: the module is imported only when that command runs (or for --help).
COMMANDS: dict[str, str] = {
    "plan": "trainfit.cli.plan_cmd:plan",
    "fit": "trainfit.cli.fit_cmd:fit",
    "export": "trainfit.cli.export_cmd:export",
    "import": "trainfit.cli.import_cmd:import_",
    "trace": "trainfit.cli.trace_cmd:trace",
    "size": "trainfit.cli.size_cmd:size",
    "audit": "trainfit.cli.audit_cmd:audit",
    "check": "trainfit.cli.check_cmd:check",
    "record": "trainfit.cli.record_cmd:record",
    "compare": "trainfit.cli.compare_cmd:compare",
    "diagnose": "trainfit.cli.diagnose_cmd:diagnose",
    "accept": "trainfit.cli.accept_cmd:accept",
    "serve": "trainfit.cli.serve_cmd:serve",
    "models": "trainfit.cli.catalog_cmd:models",
    "gpus": "trainfit.cli.catalog_cmd:gpus",
    "calibrate": "trainfit.cli.calibrate_cmd:calibrate",
}

# Commands whose module imports ``typer`` from ``trainfit.cli.fast`` (not typer itself), so a plain argv
# runs without typer: the cold-start path (``plan``) and the quick look-ups.
FAST = frozenset({"plan", "size"})


def command_function(name: str):
    """The typer command function registered as ``name`` (imports its module)."""
    from importlib import import_module

    module, _, func = COMMANDS[name].partition(":")
    return getattr(import_module(module), func)


class _LazyCommands(MutableMapping):
    """The group's command table: names come from ``COMMANDS``; a click command is built on first lookup."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            from typer.core import DEFAULT_MARKUP_MODE
            from typer.main import get_command_from_info
            from typer.models import CommandInfo

            info = CommandInfo(name=name, callback=command_function(name))
            self._built[name] = get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=DEFAULT_MARKUP_MODE)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("trainfit commands are registered in trainfit.cli.main.COMMANDS")

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._built if n not in COMMANDS)

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._built


def build_cli():
    """The click group of every registered command (each built on first use)."""
    from typer.core import DEFAULT_MARKUP_MODE, TyperGroup

    return TyperGroup(name="trainfit", commands=_LazyCommands(), help=HELP, no_args_is_help=True, rich_markup_mode=DEFAULT_MARKUP_MODE)


_NOT_FAST = object()


def _run_fast(args: list[str]) -> object:
    """The command's return value when ``args`` runs without typer (``trainfit.cli.fast``), else ``_NOT_FAST``."""
    import os

    if not args or args[0] not in FAST or "_TRAINFIT_COMPLETE" in os.environ:  # click's shell completion
        return _NOT_FAST
    from trainfit.cli import fast

    fn = command_function(args[0])
    kwargs = fast.parse(fn, args[1:])
    return _NOT_FAST if kwargs is None else fast.run(fn, kwargs)


def _one_line(exc: BaseException) -> str:
    """The error on one line: a value echoed from the input may hold newlines or control characters."""
    text = " ".join(str(exc).split("\n"))
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)[:2000]


# The cyclic garbage collector's thresholds while a planning command (``FAST``) runs: a collection of the youngest
# generation every 200,000 net container allocations instead of CPython's 700, and of the older ones after 30 of the
# younger instead of 10. A cold plan allocates several hundred thousand containers that live as long as the process
# (the modules, classes and functions its imports make), so at the defaults the collector walks them again and again
# and finds nothing to free: 4.9 % of a cold default `trainfit plan`'s instructions (valgrind, 1,966.5M -> 1,869.2M).
# The values are mypy's, set for the same reason ("Run gc less frequently, as otherwise we can spent a large fraction
# of cpu in gc": python/mypy mypy/build.py l.480 @8b3e7d8b9f63543374e53d1c389ea443dd65bc46). Only the pure planning
# commands: one that runs torch (``accept``, ``trace``) frees tensors caught in reference cycles when the collector
# runs, and ``serve`` runs for hours. The thresholds are put back when ``main`` returns (tests call it in-process).
#
# Where ``main`` runs the process's own command line (``argv`` None: the ``trainfit`` script, ``python -m trainfit``),
# the process exits next, and its exit (``Py_FinalizeEx``: ``finalize_modules``) collects every generation twice more,
# walking the same modules once again to free what the exit frees anyway: 4.2 % of a cold default `trainfit plan`'s
# instructions (valgrind, 1,825.0M -> 1,749.0M). ``gc.freeze()`` moves the objects alive then to the permanent
# generation that collections skip ("Freeze all the objects tracked by gc - move them to a permanent generation and
# ignore all the future collections": python/cpython Doc/library/gc.rst @c75edabbb65ca2bb29e51f8d1eb2c780e5890982).
# What the exit no longer does is run the ``__del__`` of objects held in reference cycles; the output is written and
# flushed before (rich flushes each print, and the exit flushes stdout and stderr itself), and the atexit handlers
# still run.
PLANNING_GC_THRESHOLDS = (200_000, 30, 30)


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and exit code 2 (``--debug`` re-raises)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in FAST:
        return _main(args)
    import gc

    before = gc.get_threshold()
    gc.set_threshold(*PLANNING_GC_THRESHOLDS)
    try:
        return _main(args)
    finally:
        gc.set_threshold(*before)
        if argv is None:  # the process's own command line: it exits next
            gc.freeze()


def _json_requested(args: list[str]) -> bool:
    """Whether the command line asks for ``--json`` as click reads it: the flag itself, not another option's value
    (``plan --model --json`` names a model) nor a word after ``--``; an unknown option before it does not hide it."""
    if len(args) < 2 or args[0] not in COMMANDS or "--json" not in args[1:]:
        return False
    try:
        command = build_cli().commands[args[0]]
        names = [p.name for p in command.params if "--json" in getattr(p, "opts", ())]
        ctx = command.make_context(args[0], list(args[1:]), resilient_parsing=True, ignore_unknown_options=True)
    except Exception:  # noqa: BLE001 - a line click cannot read at all asked for nothing it could see
        return False
    return any(ctx.params.get(name) is True for name in names)


def _json_error(line: str) -> None:
    """The refusal as one JSON object on stdout, ``{"error": line}``: the web API's shape (docs/api.md)."""
    import json

    sys.stdout.write(json.dumps({"error": line}) + "\n")


def _refuse(line: str, args: list[str]) -> int:
    """A user error: one line on stderr, under ``--json`` also ``{"error": line}`` on stdout; exit code 2."""
    sys.stderr.write(f"trainfit: error: {line}\n")
    if _json_requested(args):
        _json_error(line)
    return 2


def _main(args: list[str]) -> int:
    """``main`` on the command line's words."""
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    from trainfit.errors import TrainfitError

    try:
        rc = _run_fast(args)
        if rc is _NOT_FAST:
            # with standalone_mode=False, click returns the code of a typer.Exit instead of exiting
            rc = build_cli().main(args=args, prog_name="trainfit", standalone_mode=False)
    except TrainfitError as exc:
        if debug:
            raise
        return _refuse(_one_line(exc), args)
    except ValueError as exc:  # a spec invariant that slipped past validation
        if debug:
            raise
        return _refuse(_one_line(exc), args)
    except Exception as exc:  # usage errors, exits and aborts of typer's (vendored) click
        code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(code, int):  # a usage error: one message, its exit code
            if debug:
                raise
            exc.show()
            if code == 2 and hasattr(exc, "format_message") and _json_requested(args):
                _json_error(_one_line(exc.format_message()))
            return code
        if type(exc).__name__ == "Exit" and isinstance(code, int):
            return code
        if type(exc).__name__ == "Abort":
            return 130
        raise
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
