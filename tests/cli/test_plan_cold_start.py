"""What a cold `trainfit plan` pays for: the guards of benchmarks/speed.md's figures (no wall-clock assertion)."""

from __future__ import annotations

import types

from pydantic import BaseModel

from trainfit.spec import card as card_module


def _card_models() -> list[type[BaseModel]]:
    return [v for v in vars(card_module).values()
            if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == card_module.__name__]


def test_card_default_factories_are_plain_functions():
    """pydantic reads each default factory's signature when it builds a model: a builtin (``list``) costs a
    tokenize of its text signature, a model class the build of that model's own signature."""
    factories = [(m.__name__, name, f.default_factory) for m in _card_models() for name, f in m.model_fields.items()
                 if f.default_factory is not None]
    assert len(factories) >= 19
    assert [(m, n) for m, n, f in factories if not isinstance(f, types.FunctionType)] == []


def test_card_default_factories_make_what_they_did():
    from trainfit.spec.card import LoraSection, RunCard

    a, b = RunCard(), RunCard()
    assert a.lora == LoraSection() and a.lora.modules_to_save == [] and a.recipe.changes == []
    assert a.rollout.quantization_bf16_modules == [] and a.rollout.quantization_bf16_modules is not \
        b.rollout.quantization_bf16_modules
