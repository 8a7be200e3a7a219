"""The trace extra's shared types: the request, the per-phase results and their choices (no torch).

Every module of ``trainfit.trace`` imports its types from here and nothing imports upward:
``api`` (the entry point) runs ``extrapolate``, ``step`` and ``rl_passes``, which import
``types``, ``build`` and the trackers, never ``api``. ``trainfit.trace.api`` re-exports these
names for existing importers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from trainfit.errors import TrainfitError

Progress = Callable[[str, float], None]

ATTENTIONS = ("sdpa", "eager")
SCOPES = ("full", "lora", "qlora", "dora", "ia3", "prompt_tuning")
PRECISIONS = ("bf16", "fp32_autocast")
OPTIMIZER_IMPLS = ("fused", "foreach", "for_loop")
MODES = ("fast", "memtracker")
PHASES = ("forward", "backward", "optimizer_step")
PASS_KINDS = ("train_step", "logprob", "value", "dpo_step")
"""What is traced: the SFT training step, a no-grad log-prob pass (policy / reference / old policy),
a no-grad value pass (critic, scalar head), or a DPO training step over chosen+rejected pairs."""
PASS_PHASES = {
    "train_step": PHASES,
    "logprob": ("logprob",),
    "value": ("value",),
    "dpo_step": PHASES,
}


class TraceUnsupported(TrainfitError):
    """The requested trace cannot be run here; the message says why."""


@dataclass(frozen=True, kw_only=True)
class TraceRequest:
    """One training step to trace. Byte counts in results are per rank."""

    hf_config: dict = field(hash=False)
    """Catalog-style HF config dict (may nest ``text_config``)."""
    micro_batch_size: int = 1
    """Sequences per step on one rank."""
    seq_len: int = 2048
    """Tokens per sequence (unpacked, no padding)."""
    attention: str = "sdpa"
    """``sdpa`` (CPU flash-like kernel) or ``eager`` (materialises the s x s scores)."""
    gradient_checkpointing: bool = False
    """HF activation checkpointing (non-reentrant) on every decoder layer."""
    checkpoint_every_n_layers: int | None = None
    """With ``gradient_checkpointing``: only the decoder layers of 1-based index k with ``k % n == 0`` run under
    checkpoint (torchtitan's selective_ac_option n; ``RunCard.parallel.checkpointed_layers``); traced at full depth."""
    selective_checkpointing: str = "none"
    """``op``: every decoder layer under torch's selective checkpointing with torchtitan's per-op policy
    (``build.selective_checkpointing_context``); exclusive with ``gradient_checkpointing``."""
    scope: str = "full"
    """``full`` fine-tuning, ``lora`` (PEFT, fp32 adapters) or ``qlora``."""
    lora_rank: int = 16
    lora_alpha: float = 32
    lora_dropout: float = 0.0
    """PEFT ``lora_dropout``: > 0 wraps each adapter's input in an ``nn.Dropout`` (0: ``nn.Identity``)."""
    lora_impl: str = "peft"
    """scope ``lora``: ``peft`` (fp32 adapters) or ``automodel``: NeMo Automodel's adapter in the base dtype
    (``trainfit.trace.automodel_lora``), its dropout at ``lora_dropout_position``."""
    lora_dropout_position: str = "pre"
    """``pre``: dropout on the adapter's input (PEFT's only way); ``post`` (``lora_impl`` automodel): on its output."""
    lora_targets: tuple[str, ...] = ("all-linear",)
    double_quant: bool = True
    """scope ``qlora``: bitsandbytes double quantization of the NF4 absmax (``lora.double_quant``)."""
    nf4_compute_dtype: str = "bf16"
    """scope ``qlora``: ``bf16`` (the model loaded in bf16) or ``fp32``: loaded in float32, no autocast, so the
    4-bit GEMMs, the embeddings, norms and head run in fp32 (``precision.nf4_compute_dtype``)."""
    lora_modules_to_save: tuple[str, ...] = ()
    ia3_targets: tuple[str, ...] = ()
    """scope ``ia3``: PEFT ``target_modules`` (empty: PEFT's default for the model type)."""
    ia3_feedforward: tuple[str, ...] = ()
    """scope ``ia3``: PEFT ``feedforward_modules`` (input scaled; empty: PEFT's default for the model type)."""
    num_virtual_tokens: int = 0
    """scope ``prompt_tuning``: soft-prompt tokens prepended to every sequence (PEFT ``num_virtual_tokens``)."""
    fsdp_shard_embeddings: bool = False
    """world_size > 1: the embedding and the head are FSDP2 units of their own (torchtune custom_sharded_layers)."""
    """PEFT ``modules_to_save`` (``embed_tokens``, ``lm_head``): trained in full beside the adapter."""
    precision: str = "bf16"
    """``bf16``: pure bf16 params, grads and AdamW states; ``fp32_autocast``: fp32 params + bf16 autocast."""
    optimizer_impl: str = "fused"
    """torch AdamW: ``fused``, ``foreach`` or ``for_loop`` (foreach=False)."""
    world_size: int = 1
    """>1: ranks on a fake process group; the data-parallel ones (``world_size / tensor_parallel``)
    FSDP2-sharded with ``fully_shard`` per decoder layer and on the root."""
    tensor_parallel: int = 1
    """>1: torch's tensor-parallel plan over this many of the ranks (``trainfit.trace.tensor_parallel``)."""
    sequence_parallel: bool = False
    """With tensor_parallel: norms and the residual stream on sequence shards (``SequenceParallel``)."""
    pipeline_parallel: int = 1
    """>1: trace one pipeline stage (``pipeline_stage``) of this many under its 1F1B schedule
    (``trainfit.trace.pipeline``), at the stage's full depth."""
    pipeline_stage: int = 0
    pipeline_first_stage_layers: int | None = None
    """Decoder layers of the first stage (Megatron-Core ``num_layers_in_first_pipeline_stage``); None: even split."""
    pipeline_last_stage_layers: int | None = None
    """Decoder layers of the last stage (``num_layers_in_last_pipeline_stage``); None: even split."""
    pipeline_layout: tuple[int, ...] | None = None
    """Decoder layers of every stage, one entry per stage in model order (``parallel.pipeline_layout`` with one
    virtual stage; Megatron-Core ``pipeline_model_parallel_layout``); None: the first/last or even split."""
    micro_batches: int = 1
    """Micro-batches per step (gradient accumulation); the pipeline schedule interleaves them."""
    layers: int | None = None
    """None: full depth (extrapolated from two shallow depths when possible; for a training step on one rank or
    FSDP2 both come from one trace of the deeper, see ``trainfit.trace.step.run_depth_pair``); N: trace exactly
    N layers."""
    mode: str = "fast"
    """``fast`` (byte-counting dispatch mode) or ``memtracker`` (torch MemTracker, exact categories)."""
    pass_kind: str = "train_step"
    """``train_step`` (the SFT step), ``logprob`` (no-grad causal-LM forward + TRL's per-token
    log-probs: ``logits[:, :-1] / temperature`` then ``selective_log_softmax``; phase ``logprob``),
    ``value`` (no-grad forward of a scalar-head model, TRL's ``get_reward``: backbone + ``score``;
    phase ``value``) or ``dpo_step`` (policy step over ``2 * micro_batch_size`` sequences, chosen and
    rejected concatenated, DPO sigmoid loss on the sequence log-probs; phases forward, backward,
    optimizer_step, and ``ref_logprob`` after forward when ``dpo_reference``). See ``trainfit.trace.rl_passes``."""
    temperature: float = 1.0
    """``logprob``: the sampling temperature the logits are divided by (TRL divides unconditionally)."""
    logits_to_keep: int = 0
    """``logprob``: the completion's length, TRL GRPO's ``logits_to_keep``: the model is asked for the last
    ``logits_to_keep + 1`` positions' logits only (transformers slices the hidden states before ``lm_head``) and the
    last ``logits_to_keep`` tokens are scored (``methods.roles.logit_positions``); 0: every position (the pass before
    that TRL release)."""
    dpo_reference: bool = False
    """``dpo_step``: True runs a live reference forward (no grad) after the policy's forward, as TRL does (phase
    ``ref_logprob``): a frozen bf16 copy of the model for scope ``full``, the policy with its adapter
    disabled for LoRA. False: reference log-probs are precomputed (inputs)."""
    dpo_beta: float = 0.1
    replay_allocator: bool = False
    """Also predict ``torch.cuda.max_memory_reserved``: replay the step's allocation order through a
    model of the CUDA caching allocator (train steps, one rank, mode ``fast``). It needs the full
    depth's allocation order, so the full-depth step is traced once in place of the shallow depths."""
    keep_outputs: bool = False
    """False: drop the model output before backward, as the transformers Trainer and TRL do
    (``loss = model(...).loss``). True: keep it (``out = model(...); out.loss.backward()``), which
    holds the bf16 logits through backward (GROUND_TRUTH.md's numbers use this)."""
    kept_output_dtype: str = "compute"
    """With ``keep_outputs``: ``compute`` keeps the model output as above; ``fp32`` runs prime-rl's SFT loop
    (``trainfit.trace.loops.prime_rl_sft_loss``): the logits cast to an fp32 copy, the model output dropped, the loss
    ``torch.nn.CrossEntropyLoss(reduction="none")`` on the copy, which is kept through backward."""

    padding_mask: bool = False
    """True: the step's forward also takes an ``attention_mask`` of the batch's shape (``batch.padding`` mask: every
    sample padded to ``seq_len``, as a padding collator hands it). transformers cannot read a fake tensor's values, so
    ``_ignore_causal_mask_sdpa`` keeps the mask whatever it holds (``is_tracing`` is True for a FakeTensor:
    transformers 5.24.0 src/transformers/masking_utils.py l.280-281, utils/import_utils.py l.1948-1962), as a mask with
    zeros keeps it on a GPU (l.292): the same tensors as a real padded batch. Train steps on one rank or FSDP2, no
    tensor or pipeline parallel; not with ``kept_output_dtype`` fp32 (prime-rl's loop passes no mask)."""

    def __post_init__(self) -> None:
        for name, allowed in (
            ("attention", ATTENTIONS),
            ("scope", SCOPES),
            ("precision", PRECISIONS),
            ("optimizer_impl", OPTIMIZER_IMPLS),
            ("mode", MODES),
            ("pass_kind", PASS_KINDS),
        ):
            if getattr(self, name) not in allowed:
                raise TraceUnsupported(f"trace: {name} '{getattr(self, name)}' is not one of {', '.join(allowed)}")
        for name in ("micro_batch_size", "seq_len", "world_size", "lora_rank", "tensor_parallel"):
            if int(getattr(self, name)) < 1:
                raise TraceUnsupported(f"trace: {name} must be >= 1, got {getattr(self, name)}")
        if self.pipeline_parallel > 1 or self.micro_batches > 1:
            if self.pipeline_parallel < 1 or not 0 <= self.pipeline_stage < self.pipeline_parallel:
                raise TraceUnsupported(f"trace: pipeline_stage must be in 0..{self.pipeline_parallel - 1}")
            if self.micro_batches < 1:
                raise TraceUnsupported("trace: micro_batches must be >= 1")
            if (self.world_size > 1 or self.tensor_parallel > 1 or self.mode != "fast" or self.layers is not None
                    or self.pass_kind != "train_step" or self.replay_allocator or self.scope != "full"
                    or self.keep_outputs):
                raise TraceUnsupported("trace: a pipeline stage (or micro-batches) is traced alone: one rank, full"
                                       " scope, mode 'fast', full depth, train step")
        if self.nf4_compute_dtype not in ("bf16", "fp32") or (self.nf4_compute_dtype != "bf16" and self.scope != "qlora"):
            raise TraceUnsupported(f"trace: nf4_compute_dtype '{self.nf4_compute_dtype}': bf16 | fp32, fp32 for scope"
                                   " qlora only")
        if not 0 <= self.lora_dropout < 1:
            raise TraceUnsupported(f"trace: lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.lora_impl not in ("peft", "automodel") or self.lora_dropout_position not in ("pre", "post"):
            raise TraceUnsupported(f"trace: lora_impl '{self.lora_impl}' / lora_dropout_position"
                                   f" '{self.lora_dropout_position}': allowed peft | automodel, pre | post")
        if self.lora_dropout_position == "post" and self.lora_impl != "automodel":
            raise TraceUnsupported("trace: lora_dropout_position 'post' is NeMo Automodel's adapter (lora_impl"
                                   " automodel); PEFT applies dropout to the adapter's input only")
        if self.lora_impl == "automodel" and (self.scope != "lora" or self.lora_modules_to_save
                                              or self.pass_kind != "train_step"):
            raise TraceUnsupported("trace: lora_impl 'automodel' is traced for scope lora train steps without"
                                   " modules_to_save")
        if self.world_size % self.tensor_parallel:
            raise TraceUnsupported(f"trace: tensor_parallel {self.tensor_parallel} must divide world_size {self.world_size}")
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise TraceUnsupported("trace: sequence_parallel needs tensor_parallel > 1")
        if self.sequence_parallel and self.seq_len % self.tensor_parallel:
            raise TraceUnsupported(f"trace: sequence_parallel needs seq_len divisible by {self.tensor_parallel}")
        if self.tensor_parallel > 1 and (self.pass_kind not in ("train_step", "dpo_step") or self.replay_allocator):
            raise TraceUnsupported("trace: tensor_parallel traces the train step and the DPO step only (no other RL"
                                   " passes, no --reserved)")
        if self.tensor_parallel > 1 and self.pass_kind == "dpo_step" and self.world_size != self.tensor_parallel:
            raise TraceUnsupported(f"trace: the DPO step under tensor_parallel {self.tensor_parallel} is traced on one"
                                   f" tensor-parallel group (world_size {self.tensor_parallel}, no FSDP)")
        if self.layers is not None and self.layers < 1:
            raise TraceUnsupported(f"trace: layers must be >= 1 or None, got {self.layers}")
        if self.kept_output_dtype not in ("compute", "fp32"):
            raise TraceUnsupported(f"trace: kept_output_dtype '{self.kept_output_dtype}' is not one of compute, fp32")
        if self.kept_output_dtype == "fp32" and (not self.keep_outputs or self.tensor_parallel > 1):
            raise TraceUnsupported("trace: kept_output_dtype fp32 needs keep_outputs (a train step, tensor_parallel 1)")
        if self.pass_kind != "train_step":
            if self.world_size > 1 and not (self.pass_kind == "dpo_step" and self.world_size == self.tensor_parallel):
                raise TraceUnsupported(f"trace: pass_kind '{self.pass_kind}' is traced on one rank only (world_size 1)")
            if self.mode != "fast":
                raise TraceUnsupported(f"trace: pass_kind '{self.pass_kind}' is traced in mode 'fast' only")
            if self.keep_outputs:
                raise TraceUnsupported("trace: keep_outputs applies to pass_kind 'train_step' only")
        if self.selective_checkpointing not in ("none", "op"):
            raise TraceUnsupported(f"trace: selective_checkpointing '{self.selective_checkpointing}' is not traced;"
                                   " allowed: none, op (Megatron's core_attention recompute needs Megatron)")
        if self.selective_checkpointing != "none" and (self.gradient_checkpointing or self.pass_kind != "train_step"):
            raise TraceUnsupported("trace: selective_checkpointing applies to a train_step without full checkpointing")
        if self.checkpoint_every_n_layers is not None and (
                self.checkpoint_every_n_layers < 1 or not self.gradient_checkpointing or self.tensor_parallel > 1
                or self.pipeline_parallel > 1 or self.micro_batches > 1 or self.pass_kind != "train_step"):
            raise TraceUnsupported("trace: checkpoint_every_n_layers needs an integer >= 1, gradient_checkpointing, a"
                                   " train step and no tensor or pipeline parallel")
        if self.pass_kind in ("logprob", "value") and self.gradient_checkpointing:
            raise TraceUnsupported(
                f"trace: pass_kind '{self.pass_kind}' is a no-grad forward; gradient_checkpointing does not apply"
            )
        if self.replay_allocator and (self.pass_kind != "train_step" or self.world_size > 1 or self.mode != "fast"):
            raise TraceUnsupported("trace: --reserved (replay_allocator) needs one GPU (world_size 1), a train step and mode 'fast'")
        if self.dpo_reference and self.pass_kind != "dpo_step":
            raise TraceUnsupported("trace: dpo_reference applies to pass_kind 'dpo_step' only")
        if not self.temperature > 0:
            raise TraceUnsupported(f"trace: temperature must be > 0, got {self.temperature}")
        if self.logits_to_keep and (self.pass_kind != "logprob" or not 0 < self.logits_to_keep < self.seq_len):
            raise TraceUnsupported(f"trace: logits_to_keep applies to pass_kind 'logprob' with 0 < logits_to_keep <"
                                   f" seq_len ({self.seq_len}), got {self.logits_to_keep}")
        if self.padding_mask and (self.pass_kind != "train_step" or self.tensor_parallel > 1
                                  or self.pipeline_parallel > 1 or self.micro_batches > 1):
            raise TraceUnsupported("trace: padding_mask is traced for a train step on one rank or FSDP2 (no tensor or"
                                   " pipeline parallel, one micro-batch)")
        if self.padding_mask and self.kept_output_dtype == "fp32":
            raise TraceUnsupported("trace: padding_mask with kept_output_dtype fp32: prime-rl's SFT loop"
                                   " (trace.loops.prime_rl_sft_loss) calls the model without an attention mask")

    @property
    def phase_names(self) -> tuple[str, ...]:
        """The phases this request reports, in order."""
        if self.pass_kind == "dpo_step" and self.dpo_reference:
            return PHASES[:1] + ("ref_logprob",) + PHASES[1:]
        return PASS_PHASES[self.pass_kind]


@dataclass(frozen=True)
class PhaseTrace:
    name: str
    """``forward`` | ``backward`` | ``optimizer_step`` (the latter includes ``zero_grad``); RL passes:
    ``logprob`` | ``value`` | ``ref_logprob``."""
    peak_bytes: int
    """Peak live bytes during this phase of the steady-state step."""
    breakdown: dict[str, int]
    """At this phase's peak: weights, gradients, optimizer_states, activations, temporaries."""


@dataclass(frozen=True)
class TraceResult:
    peak_bytes: int
    peak_phase: str
    phases: tuple[PhaseTrace, ...]
    params_total: int
    params_trainable: int
    seconds: float
    layers_traced: tuple[int, ...]
    """The depths actually traced: one for the one-trace extrapolation (the shallower step is cut out of it,
    as ``notes`` says), two where each depth is traced, the full depth otherwise."""
    extrapolated: bool
    notes: tuple[str, ...]
    reserved_bytes: int | None = None
    """``torch.cuda.max_memory_reserved`` of the repeated step predicted by replaying the traced
    allocation order through a model of the CUDA caching allocator
    (``trainfit.memory.caching_allocator``; includes 64 MiB of cuBLAS workspaces). Train steps on
    one rank only; from the full-depth step (``replay_allocator`` traces it instead of extrapolating)."""

    def phase(self, name: str) -> PhaseTrace:
        return next(p for p in self.phases if p.name == name)
