"""On-disk size of one checkpoint: full training state, weights only, adapter only.

A checkpoint holds what ``torch.save``/safetensors writes, i.e. the same bytes as the tensors
in memory, once (not per rank):

full state (what exact resume needs; transformers Trainer ``checkpoint-N/``)
    full scope: weights in their storage dtype + optimizer states + fp32 master weights (when
    the trainable weights are below fp32 and the card asks for them) + scheduler/RNG/trainer
    state. LoRA/QLoRA scope: the adapter + *its* optimizer states + scheduler/RNG; the frozen
    base is reloaded from the model revision, not saved.
weights only
    every parameter in its storage dtype (the base plus the adapter for LoRA scopes).
adapter only
    the LoRA A/B matrices in the adapter dtype (PEFT ``save_pretrained``); 0 for full scope.

Optimizer-state bytes come from ``trainfit.memory.optimizer`` with the same state-dtype rule as
``trainfit.plan.terms.step_terms``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.memory.optimizer import master_weight_bytes, optimizer_state_bytes
from trainfit.memory.params import param_tensors
from trainfit.memory.weights import count_scale
from trainfit.spec.card import RunCard
from trainfit.spec.enums import MasterWeights, Scope, StatesDtype
from trainfit.units import BYTES_PER_DTYPE, KIB

TRAINER_STATE_BYTES_PER_RANK = 64 * KIB
"""RNG states (python, numpy, torch CPU + CUDA) per rank plus scheduler and trainer_state.json: a few KiB each."""
ADAPTER_NOTE = (
    "an adapter-only save is for deployment: it cannot resume training exactly "
    "(optimizer, scheduler, RNG and data position are missing)"
)


@dataclass(frozen=True, slots=True)
class CheckpointSizes:
    full_state_bytes: float
    """What exact resume needs (see module docstring)."""
    weights_only_bytes: float
    adapter_only_bytes: float
    """0 for full scope."""
    note: str

    def per_checkpoint_bytes(self, card: RunCard) -> float:
        """What each kept checkpoint costs under the card's resume method."""
        if card.scope is not Scope.FULL and card.checkpoint.resume == "adapter_only":
            return self.adapter_only_bytes
        return self.full_state_bytes


def checkpoint_bytes(
    *,
    params_total: float,
    params_trainable: float,
    weights_bytes_per_param: float,
    trainable_bytes_per_param: float,
    optimizer_state_bytes_total: float,
    master_weights: bool,
    adapter: bool,
    world_size: int = 1,
) -> CheckpointSizes:
    """Sizes from plain numbers (bytes).

    ``trainable_bytes_per_param``: storage of the trainable tensors (the weights for full scope,
    the adapter dtype for LoRA). ``optimizer_state_bytes_total``: states of all trainable
    parameters, unsharded.
    """
    trainer_state = TRAINER_STATE_BYTES_PER_RANK * world_size
    master = master_weight_bytes(params=params_trainable) if master_weights else 0.0
    trainable = params_trainable * trainable_bytes_per_param
    base = params_total * weights_bytes_per_param
    if adapter:
        full = trainable + optimizer_state_bytes_total + master + trainer_state
        return CheckpointSizes(full, base + trainable, trainable, ADAPTER_NOTE + "; the full state excludes the frozen base")
    full = base + optimizer_state_bytes_total + master + trainer_state
    return CheckpointSizes(full, base, 0.0, "full scope: no adapter; resume needs the full state")


def checkpoint_sizes(card: RunCard, plan) -> CheckpointSizes:
    """Checkpoint sizes for a card and its ``trainfit.plan.Plan``."""
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.terms import lora_tensors

    prec = card.precision
    trainable = trainable_spec(card)
    w_bytes = BYTES_PER_DTYPE[card.weights_dtype.value]
    n_train = float(plan.params_trainable)
    if trainable.lora is not None:
        train_bytes = float(trainable.lora.adapter_dtype_bytes)
        tensors = lora_tensors(plan.spec, trainable.lora)
    else:
        train_bytes = w_bytes
        tensors = param_tensors(plan.spec)
    use_master = prec.master_weights is MasterWeights.FP32 and train_bytes < 4
    state_bytes = {StatesDtype.FP32: 4.0, StatesDtype.BF16: 2.0}.get(
        prec.optimizer_states, 4.0 if use_master else train_bytes
    )
    opt = optimizer_state_bytes(optimizer=prec.optimizer, params=n_train, tensors=tensors, state_bytes=state_bytes)
    if trainable.lora is None and prec.optimizer.value not in ("adamw", "paged_adamw"):
        opt *= count_scale(plan.spec)  # per-tensor formulas count the reference shape (as step_terms does)
    return checkpoint_bytes(
        params_total=plan.params_total,
        params_trainable=n_train,
        weights_bytes_per_param=w_bytes,
        trainable_bytes_per_param=train_bytes,
        optimizer_state_bytes_total=opt,
        master_weights=use_master,
        adapter=trainable.lora is not None,
        world_size=plan.sharding.world_size,
    )
