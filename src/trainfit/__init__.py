"""trainfit: will this post-training run fit, on how many cards, at what cost?

The Python API (docs/python-api.md), imported lazily (``import trainfit`` loads no torch and no
planner until used)::

    import trainfit
    p = trainfit.plan("card.yaml")       # a Plan; in a notebook it shows its chart
    p.to_dict()                          # the `trainfit plan --json` object
    trainfit.fit("card.yaml", gpus=["rtx4090", "a100-80gb"], steps=200)
    trainfit.size("Qwen/Qwen3.5-27B")
    trainfit.trace("card.yaml")          # needs the trace extra (torch)

``trainfit.plan``, ``trainfit.trace`` and ``trainfit.size`` are also the subpackages that hold the
planner, the tracer and the size core (``trainfit.plan.make_plan``...): calling one of them calls
the API function of that name.
"""

import sys as _sys
from types import ModuleType as _ModuleType

__version__ = "0.1.0"

__all__ = ["Plan", "RunCard", "__version__", "fit", "load_card", "plan", "size", "trace", "watch"]

_CALLABLE = frozenset({"plan", "trace", "size"})
"""Subpackages that are also API functions."""
_API = frozenset({"fit", "load_card"})


class _CallableModule(_ModuleType):
    """A subpackage that is also the API function of its name (``trainfit.plan(card)``)."""

    def __call__(self, *args, **kwargs):
        from trainfit import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(_ModuleType):
    def __setattr__(self, name, value):
        # the import system binds each imported subpackage here: make plan/trace/size callable
        if name in _CALLABLE and type(value) is _ModuleType:
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


def __getattr__(name):
    if name in _CALLABLE:
        import importlib

        return importlib.import_module(f"trainfit.{name}")
    if name in _API:
        from trainfit import api

        return getattr(api, name)
    if name == "watch":  # a callable package of its own (trainfit.watch(card)); imports no torch
        import importlib

        return importlib.import_module("trainfit.watch")
    if name == "Plan":
        from trainfit.plan.result import Plan

        return Plan
    if name == "RunCard":
        from trainfit.spec.card import RunCard

        return RunCard
    raise AttributeError(f"module 'trainfit' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(__all__))


_sys.modules[__name__].__class__ = _Package
for _name in _CALLABLE:  # bound before this ran (not expected: nothing above imports them)
    if isinstance(_sys.modules.get(f"{__name__}.{_name}"), _ModuleType):
        setattr(_sys.modules[__name__], _name, _sys.modules[f"{__name__}.{_name}"])
