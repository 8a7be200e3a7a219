"""Which activation checkpoint a card's full recompute runs: re-entrant (the whole layer re-runs in the backward and
its first forward runs under ``torch.no_grad``) or torch's non-re-entrant one. The step-time model reads it
(``compute.training.train_step_time``: ``recompute_whole_layer`` and the no-grad forward's host rate); memory counts
the non-re-entrant checkpoint's saved tensors either way, except bitsandbytes before 0.43.2, whose MatMul4Bit inputs
the non-re-entrant checkpoint's recorded first forward keeps (``memory.bnb_saved_input``).

The card says so itself (``loop.checkpoint_reentrant``), or its own settings decide:

* Megatron-Core layers (``tensor_parallel_impl: megatron``): re-entrant, Megatron's ``CheckpointFunction`` (an
  ``autograd.Function`` whose forward runs under ``torch.no_grad``).
* LLaMA-Factory's presets: re-entrant (``REENTRANT_CHECKPOINT_PRESETS``); verl's and NeMo RL's (DTensor) presets:
  non-re-entrant whatever the transformers pin (``NON_REENTRANT_CHECKPOINT_PRESETS``).
* transformers' modelling code (``plan.terms.runs_hf_modelling_code``) checkpointed by the HF Trainer: what
  ``PreTrainedModel.gradient_checkpointing_enable`` passes to ``torch.utils.checkpoint.checkpoint`` when the
  Trainer hands it ``TrainingArguments.gradient_checkpointing_kwargs`` (default None): ``{"use_reentrant": True}``
  before transformers 5 (``HF_REENTRANT_BEFORE``), ``{"use_reentrant": False}`` from 5.0 on; TRL's trainers set
  ``use_reentrant`` False by default on transformers < 5 from TRL 0.27 (``TRL_NON_REENTRANT_SINCE``), and force it
  True for a PEFT model under DeepSpeed ZeRO-3 (``trl_forces_reentrant``).

torchtitan's full activation checkpoint is non-re-entrant too: ``ptd_checkpoint_wrapper(module, ...,
early_stop=False)`` (pytorch/torchtitan @b5bcd76c66d0acb1a08b176d9639425bc55e0b2a
torchtitan/distributed/activation_checkpoint.py l.176-182), whose ``checkpoint_impl`` defaults to
``CheckpointImpl.NO_REENTRANT`` (torch 2.13.0 wheel torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py
l.196-198); a torchtitan card pins no transformers, so the rules below leave it non-re-entrant. (With
``early_stop=False`` its recompute re-runs the whole block, the last linear and residual add included, which
``recompute_whole_layer`` ties to the re-entrant checkpoint: not modelled, the card cannot tell torchtitan apart.)

A missing ``software`` pin, or one that names no release (a branch such as ``main``, a commit hash:
``spec.card.pin_names_release``), reads as the newest release, as everywhere else on the card
(``spec.card.pin_before``): transformers 5's non-re-entrant checkpoint, TRL's newest trainers. A major series
(``4.x``) reads as that major. Not read (no card field says so): a remote-code
model that calls ``torch.utils.checkpoint.checkpoint`` without the keyword (torch's default is still
``use_reentrant=True``, with a warning: torch 2.13.0 wheel, torch/utils/checkpoint.py l.486-496, read 2026-12-03; Qwen
(1.0)'s ``QWenModel`` does so) and a model that calls DeepSpeed's ``checkpointing.checkpoint`` (re-entrant:
deepspeedai/DeepSpeed @edaa7221267243c7be7fb49c5d5f5c4fb97b4641
deepspeed/runtime/activation_checkpointing/checkpointing.py l.567, 1058-1086): set ``loop.checkpoint_reentrant`` for
such a run.
"""

from __future__ import annotations

from trainfit.plan.terms import runs_hf_modelling_code
from trainfit.spec.card import RunCard, pin_at_least, pin_before, pin_names_release
from trainfit.spec.enums import Method, Scope, Strategy, TensorParallelImpl

REENTRANT_CHECKPOINT_PRESETS = ("llamafactory-z2", "llamafactory-z3", "ms-swift-zero2", "ms-swift-zero3")
"""Presets whose framework checkpoints layers re-entrantly by default, whatever the transformers release.
LLaMA-Factory's ``prepare_model_for_training`` calls its ``_gradient_checkpointing_enable`` with
``{"use_reentrant": model_args.use_reentrant_gc}``, whose default is True (hiyouga/LLaMA-Factory
@1d6e8b218240c154638f9bdcb76a1a089c27891b src/llamafactory/model/model_utils/checkpointing.py l.104-131, 164-167;
src/llamafactory/hparams/model_args.py l.179-182), then ``partial(checkpoint, **kwargs)`` of torch.utils.checkpoint.
ms-swift's Trainer mixin replaces ``torch.utils.checkpoint.checkpoint`` (and transformers' reference to it) by a
wrapper that passes its own ``use_reentrant`` whatever the caller's: with ``gradient_checkpointing_kwargs`` unset,
False only for a distributed run without DeepSpeed or FSDP, True otherwise, so under its DeepSpeed presets True
(modelscope/ms-swift @3602360a562313afbf2ef6065fdf61f271a2c5b9 swift/trainers/mixin.py l.900-927
``_fix_gradient_checkpointing``, called from the constructor l.141; v3.6.0 l.336-358; before v3.6
swift/trainers/arguments.py set True by default outright, v3.5.3 l.69-80)."""

NON_REENTRANT_CHECKPOINT_PRESETS = ("verl", "nemo-rl")
"""Presets whose framework checkpoints transformers' layers non-re-entrantly, whatever the transformers release:
verl's FSDP engine calls ``module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":
False})`` (verl-project/verl @1dda039b9c6311889a9c9a26040677e1254814f9 verl/workers/engine/fsdp/transformer_impl.py
l.316-317; its activation offload's own checkpoint, verl/utils/activation_offload.py l.425, is re-entrant and not
read here); NeMo RL's DTensor policy wraps each layer in ``checkpoint_wrapper(layers[i])``
(NVIDIA-NeMo/RL @7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/models/dtensor/parallelize.py l.505), torch's
``CheckpointImpl.NO_REENTRANT`` by default. A nemo-rl card on Megatron-Core layers is re-entrant (Megatron's)."""

HF_REENTRANT_BEFORE = (5, 0)
"""transformers' ``PreTrainedModel.gradient_checkpointing_enable(gradient_checkpointing_kwargs=None)`` sets
``gradient_checkpointing_kwargs = {"use_reentrant": True}`` through 4.x (transformers 4.46.0 wheel
src/transformers/modeling_utils.py l.2597; 4.57.1 wheel l.3692) and ``{"use_reentrant": False}`` from 5.0 (5.0.0
wheel l.3099); the Trainer calls it with ``args.gradient_checkpointing_kwargs`` (4.46.0 trainer.py l.2252, 4.57.1
l.2447, 5.0.0 l.2310), whose default is None (4.57.1 training_args.py l.714, 1411). Wheels from PyPI, read
2026-12-03."""

TRL_NON_REENTRANT_SINCE = (0, 27)
"""TRL's configs default ``gradient_checkpointing_kwargs["use_reentrant"]`` to False when transformers is before 5,
keeping a value the user set: ``if self.gradient_checkpointing and Version(transformers.__version__) <
Version("5.0.0"): ... setdefault("use_reentrant", False)`` (huggingface/trl v0.27.0
@17acd61f28140243a458d10656a2194af788ff38 trl/trainer/sft_config.py l.281-287, grpo_config.py l.867-873,
dpo_config.py l.506-512; moved into the trainers in v0.28.0 @49ef33428c47235991acb4e185ea599b70c6dab4
trl/trainer/sft_trainer.py l.901-907). v0.26.0 has no such line: the Trainer's default (``HF_REENTRANT_BEFORE``)."""

TRL_PEFT_ZERO3_REENTRANT_SINCE = {Method.SFT: (0, 28), Method.GRPO: (1, 9), Method.DPO: (1, 9)}
"""TRL's trainers that force ``use_reentrant`` True for a PEFT model under DeepSpeed ZeRO-3 with gradient
checkpointing ("PEFT + DeepSpeed ZeRO-3 requires reentrant checkpointing", overriding a user's False with a
warning), and the release each first does so in: ``SFTTrainer`` from v0.28.0 (huggingface/trl
@49ef33428c47235991acb4e185ea599b70c6dab4 trl/trainer/sft_trainer.py l.727-743), ``GRPOTrainer`` and ``DPOTrainer``
from v1.9.0 (@35def3ee000a87f6839e66f4b7749b06274ed1b3 trl/trainer/grpo_trainer.py l.472-489, dpo_trainer.py
l.672-689); v1.8.0 has neither."""


def trl_forces_reentrant(card: RunCard) -> bool:
    """Whether TRL forces a re-entrant checkpoint on the card (``TRL_PEFT_ZERO3_REENTRANT_SINCE``): a TRL run (preset
    trl or a ``software.trl`` pin) of an adapter (any scope but full) under ZeRO-3, with a trainer that forces it in
    the pinned release (no pin, or one that names no release such as ``main`` or a commit: the newest)."""
    since = TRL_PEFT_ZERO3_REENTRANT_SINCE.get(card.method)
    pin = card.software.trl
    return (since is not None and card.scope is not Scope.FULL and card.parallel.strategy is Strategy.ZERO3
            and (not pin_names_release(pin) or pin_at_least(pin, since)))


def checkpoint_reentrant(card: RunCard) -> bool:
    """Whether full activation recompute re-runs the whole layer (a re-entrant checkpoint): ``loop.checkpoint_reentrant``
    as set, else the default of the card's own settings (the module docstring; each rule's constant cites its
    lines)."""
    if card.loop.checkpoint_reentrant is not None:
        return card.loop.checkpoint_reentrant
    if card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON or card.preset in REENTRANT_CHECKPOINT_PRESETS:
        return True
    if not runs_hf_modelling_code(card) or card.preset in NON_REENTRANT_CHECKPOINT_PRESETS:
        return False
    trl = card.preset == "trl" or bool(card.software.trl)
    if trl and trl_forces_reentrant(card):
        return True
    if not pin_before(card.software.transformers, HF_REENTRANT_BEFORE):
        return False  # transformers 5 (or no pin: the newest): use_reentrant False
    # transformers 4.x: the Trainer's use_reentrant True, unless a TRL from 0.27 on sets False (a TRL pin naming no
    # release, a branch or a commit, or none: the newest)
    trl_pin = card.software.trl
    return not (trl and (not pin_names_release(trl_pin) or pin_at_least(trl_pin, TRL_NON_REENTRANT_SINCE)))
