"""What every exporter shares: the result type and the card facts the targets need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainfit.spec.card import RunCard
from trainfit.spec.enums import Attention, ComputeDtype, Method, Placement, RolloutEngine, Scope, Strategy

TARGETS = ("accelerate", "deepspeed", "trl", "verl", "openrlhf")


@dataclass(frozen=True, slots=True)
class Export:
    """One exported launch config.

    ``text`` is what a user saves to a file (YAML, JSON, a Python snippet, or a command line);
    ``data`` is the same config as Python values; ``notes`` says every card setting the target
    cannot express, or expresses another way, in one line each.
    """

    target: str
    text: str
    data: Any
    notes: list[str] = field(default_factory=list)
    filename: str = ""
    """The file name the other exports refer to (e.g. ``accelerate.yaml`` in the TRL launch line)."""

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "filename": self.filename, "data": self.data, "notes": list(self.notes), "text": self.text}


def model_name(card: RunCard) -> str:
    """The model id or path a framework loads."""
    m = card.model
    if isinstance(m, str):
        return m
    return m.path or m.id or (card.name or "MODEL_PATH")


def is_rl(card: RunCard) -> bool:
    return card.method in (Method.PPO, Method.GRPO)


def non_default(card: RunCard, dotted: str) -> bool:
    """True when the card's value differs from the field's default (so a missing knob is worth saying)."""
    section, _, key = dotted.partition(".")
    if not key:
        return getattr(card, section) != RunCard.model_fields[section].get_default(call_default_factory=True)
    sec = getattr(card, section)
    return getattr(sec, key) != type(sec).model_fields[key].get_default(call_default_factory=True)


def train_gpus_per_node(card: RunCard) -> int:
    """GPUs per node that train: all of them, less the rollout engine's under a split placement."""
    if is_rl(card) and card.rollout.placement is Placement.SPLIT:
        return card.hardware.gpus_per_node - (card.rollout.gpus or 0)
    return card.hardware.gpus_per_node


def train_world(card: RunCard) -> int:
    return train_gpus_per_node(card) * card.hardware.nodes


def is_fsdp(card: RunCard) -> bool:
    return card.parallel.strategy in (Strategy.FSDP, Strategy.FSDP_GRAD_OP, Strategy.HSDP)


def zero_stage(card: RunCard) -> int | None:
    return {Strategy.ZERO1: 1, Strategy.ZERO2: 2, Strategy.ZERO3: 3}.get(card.parallel.strategy)


def mixed_precision(card: RunCard) -> str:
    return {ComputeDtype.BF16: "bf16", ComputeDtype.FP16: "fp16", ComputeDtype.FP32: "no"}[card.precision.compute]


def torch_dtype_name(card: RunCard) -> str:
    """The dtype the trainable model is loaded in (transformers ``dtype=``)."""
    w = card.weights_dtype.value
    return {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(w, "bfloat16")


HF_ATTENTION = {Attention.SDPA: "sdpa", Attention.FLASH: "flash_attention_2", Attention.EAGER: "eager"}


def lora_targets(card: RunCard) -> str | list[str]:
    t = card.lora.targets
    return t if isinstance(t, str) else list(t)


def is_adapter(card: RunCard) -> bool:
    return card.scope is not Scope.FULL


def global_batch(card: RunCard) -> int:
    """Sequences per optimizer step: micro-batch x accumulation x training GPUs."""
    return card.batch.micro_batch_size * card.batch.grad_accum * train_world(card)


def shared_notes(card: RunCard, target: str) -> list[str]:
    """Card settings no launch config of any target expresses."""
    notes: list[str] = []
    p = card.precision
    if p.optimizer_in_backward:
        notes.append(f"precision.optimizer_in_backward: {target} has no optimizer-in-backward; the step runs after backward")
    if non_default(card, "parallel.compile") and card.parallel.compile and target in ("verl", "openrlhf"):
        notes.append(f"parallel.compile: {target} has no torch.compile switch for the trained model here")
    return notes
