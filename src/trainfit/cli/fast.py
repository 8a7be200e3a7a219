"""The cold start of a simple command line, without typer.

Importing typer costs a cold ``trainfit plan --json`` about 40 modules and 60-90 ms of CPU (typer.main,
its vendored click, pydantic's type adapters for each parameter, subprocess, inspect...): a sixth of
the run. For the commands in ``trainfit.cli.main.FAST`` an argv that only uses long options with plain
values is parsed here instead, from the same annotations typer reads, and the command function is
called with the keyword arguments typer would pass it (``tests/cli/test_cli_fast.py`` holds that
equality over the commands' whole option sets). Anything else (``--help``, an unknown or repeated
option, ``--x=y``, a value that starts with ``-``, is empty or is not a plain decimal for an int, a
missing required argument, a parameter with a callback or bounds) returns None and typer parses, so
every usage error and its message stay typer's.

A command module that wants this imports ``typer`` from here (``from trainfit.cli.fast import typer``):
a stand-in that imports the real typer on first attribute access. Its annotations are strings
(``from __future__ import annotations``): typer evaluates them with the real module, ``parse`` with a
recorder.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class _LazyTyper:
    """``typer``, imported on first use (``typer.Option``, ``typer.Exit``...)."""

    def __getattr__(self, name: str) -> Any:
        import typer as _typer

        return getattr(_typer, name)


typer: Any = _LazyTyper()

# typer.Option / typer.Argument keywords that change only the help text: a parameter with any other
# keyword (callback, min/max, envvar, case_sensitive, click_type, is_eager...) is left to typer
_HELP_ONLY = frozenset({"help", "show_default", "metavar", "rich_help_panel", "hidden"})
_INT_MAX_DIGITS = 18


class _Declared:
    """What ``typer.Option(...)`` / ``typer.Argument(...)`` was called with in an annotation."""

    def __init__(self, kind: str, decls: tuple[Any, ...], keywords: dict[str, Any]) -> None:
        self.kind, self.decls, self.keywords = kind, decls, keywords


class _Recorder:
    """Stands for the typer module while ``parse`` evaluates a command's annotations."""

    @staticmethod
    def Option(*decls: Any, **keywords: Any) -> _Declared:
        return _Declared("option", decls, keywords)

    @staticmethod
    def Argument(*decls: Any, **keywords: Any) -> _Declared:
        return _Declared("argument", decls, keywords)


class _Param:
    __slots__ = ("default", "kind", "multiple", "name", "required", "type")

    def __init__(self, name: str, kind: str, type_: type, multiple: bool, default: Any, required: bool) -> None:
        self.name, self.kind, self.type, self.multiple = name, kind, type_, multiple
        self.default, self.required = default, required


_SPECS: dict[Callable[..., Any], tuple[list[_Param], dict[str, tuple[_Param, Any]]] | None] = {}
_VALUE = object()  # an option that takes the next word as its value (not a flag)


def _base(hint: Any) -> tuple[type, bool] | None:
    """(value type, multiple) of an unwrapped annotation this parser reads, else None."""
    import types
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(args) != 2:
            return None
        hint, origin, args = rest[0], typing.get_origin(rest[0]), typing.get_args(rest[0])
    if origin is list and args in ((str,), (int,), (Path,)):
        return args[0], True
    if hint in (str, int, bool, Path):
        return hint, False
    return None


def _spec(fn: Callable[..., Any]) -> tuple[list[_Param], dict[str, tuple[_Param, Any]]] | None:
    """(the parameters in order, option word -> (parameter, flag value or _VALUE)), or None where a
    parameter is not one this parser reads exactly as typer does."""
    if fn in _SPECS:
        return _SPECS[fn]
    import inspect
    import typing

    _SPECS[fn] = None
    try:
        hints = typing.get_type_hints(fn, globalns={**fn.__globals__, "typer": _Recorder}, include_extras=True)
    except (NameError, AttributeError, TypeError, SyntaxError):  # not evaluable with the stand-in: typer's
        return None
    params: list[_Param] = []
    words: dict[str, tuple[_Param, Any]] = {}
    for name, sig in inspect.signature(fn).parameters.items():
        hint = hints.get(name)
        if sig.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD or typing.get_origin(hint) is not typing.Annotated:
            return None
        base, *meta = typing.get_args(hint)
        declared = [m for m in meta if isinstance(m, _Declared)]
        typed = _base(base)
        if len(declared) != 1 or typed is None or set(declared[0].keywords) - _HELP_ONLY:
            return None
        d, (type_, multiple) = declared[0], typed
        if not all(isinstance(x, str) and x.startswith("--") for x in d.decls):
            return None
        required = sig.default is inspect.Parameter.empty
        p = _Param(name, d.kind, type_, multiple, None if required else sig.default, required)
        params.append(p)
        if d.kind == "argument":
            if d.decls or multiple or type_ is bool:
                return None
            continue
        decls = list(d.decls) or [f"--{name.replace('_', '-')}" + (f"/--no-{name.replace('_', '-')}" if type_ is bool else "")]
        for decl in decls:
            on, _, off = decl.partition("/")
            if type_ is bool:
                if multiple or required or (off and not off.startswith("--")) or (not off and sig.default is not False):
                    return None  # a lone flag defaults to False; other boolean shapes stay typer's
                words[on] = (p, True)
                if off:
                    words[off] = (p, False)
            elif off:
                return None
            else:
                words[on] = (p, _VALUE)
    _SPECS[fn] = (params, words)
    return _SPECS[fn]


def _value(type_: type, word: str) -> Any:
    """``word`` as typer converts it to ``type_``, or None where typer might read it otherwise."""
    if not word or word.startswith("-"):
        return None
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:  # surrogate-escaped bytes: typer's (pydantic's) str check decides
        return None
    if type_ is str:
        return word
    if type_ is Path:
        return Path(word)
    if type_ is int:
        if word.isascii() and word.isdigit() and len(word) <= _INT_MAX_DIGITS and (word == "0" or word[0] != "0"):
            return int(word)
        return None
    return None


def parse(fn: Callable[..., Any], args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments typer would call ``fn`` with for ``args``, or None (typer parses)."""
    spec = _spec(fn)
    if spec is None:
        return None
    params, words = spec
    values: dict[str, Any] = {}
    many: dict[str, list[Any]] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-"):
            positional.append(word)
            continue
        if word not in words:  # --help, --, -x, --x=y, an unknown option: typer's
            return None
        p, flag = words[word]
        if flag is not _VALUE:
            if p.name in values:  # --ckpt --no-ckpt, --json --json
                return None
            values[p.name] = flag
            continue
        if i >= len(args) or (p.name in values and not p.multiple):
            return None
        value = _value(p.type, args[i])
        i += 1
        if value is None:
            return None
        if p.multiple:
            many.setdefault(p.name, []).append(value)
        else:
            values[p.name] = value
    arguments = [p for p in params if p.kind == "argument"]
    if len(positional) > len(arguments):
        return None
    for p, word in zip(arguments, positional):
        value = _value(p.type, word)
        if value is None:
            return None
        values[p.name] = value
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.multiple:
            kwargs[p.name] = many[p.name] if p.name in many else (None if p.default is None else list(p.default))
        elif p.name in values:
            kwargs[p.name] = values[p.name]
        elif p.required:
            return None
        else:
            kwargs[p.name] = p.default
    return kwargs


def run(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call ``fn`` as typer's command does under ``trainfit.cli.main.main`` (``standalone_mode=False``): Ctrl-C
    is exit code 130 (typer's ``Exit(130)``), end of input a newline on stderr and 130 (click's ``Abort``), a
    closed stdout pipe exit code 1."""
    import errno

    try:
        return fn(**kwargs)
    except KeyboardInterrupt:
        return 130
    except EOFError:
        sys.stderr.write("\n")
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = _Pacified(sys.stdout)
        sys.stderr = _Pacified(sys.stderr)
        sys.exit(1)


class _Pacified:
    """click's ``PacifyFlushWrapper``: a stream whose ``flush`` ignores a broken pipe (the interpreter
    flushes stdout at exit)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            import errno

            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
