"""Resolve a run card into specs: the model, the GPU, what is trained, the price; and re-validated
copies of a card with fields replaced.

Pure: no torch, no I/O beyond reading catalog data files.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from pydantic import ValidationError

from trainfit.catalog.gpus import GpuSpec, custom_gpu, resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.errors import CardError
from trainfit.spec.card import RunCard, format_validation_error, pin_before
from trainfit.spec.enums import (AdapterDtype, Attention, ComputeDtype, ExpertAdapters, LoraDropoutPosition, Method,
                                 MoeExperts, Nf4ComputeDtype, Scope, TensorParallelImpl)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import LoraSpec, TrainableSpec


def model_spec_of(card: RunCard) -> ModelSpec:
    m = card.model
    if not isinstance(m, str) and m.config is not None:
        from trainfit.catalog.hf_config import spec_from_hf_config

        spec = spec_from_hf_config(m.config, name=m.id or "inline config", source="inline config in the run card")
    else:
        spec = resolve_model(_model_ref(card), revision=_revision(card))
    if not isinstance(m, str) and m.mtp:
        from trainfit.errors import ConfigError
        from trainfit.spec.model import with_mtp

        try:
            spec = with_mtp(spec)
        except ConfigError as exc:
            raise CardError(f"model.mtp: {exc}") from None
    if spec.fused_rotary and not flash_rotary_runs(card):
        spec = replace(spec, fused_rotary=False)
    return spec


def method_model_spec(card: RunCard, spec: ModelSpec) -> ModelSpec:
    """The model the card's method trains, from the checkpoint's ``spec``: the one place that says it, read by the
    memory walk, the time model, the plan's parameter counts and the checkpoint sizes. A reward model
    (``method: rm``) is a sequence-classification model: ``lm_head`` is dropped and a ``hidden x num_labels`` score
    head with no bias takes its place, num_labels 1 for a pairwise reward (transformers
    ``GenericForSequenceClassification.__init__``: ``self.score = nn.Linear(config.hidden_size, self.num_labels,
    bias=False)``, src/transformers/modeling_layers.py @9f84789d9a6a13ce7ddf2e57a940db5bb1ea4c50 l.105; Qwen3's is
    that class, src/transformers/models/qwen3/modeling_qwen3.py @000c33fdfde12e1ffafbfcdb3c926df5727a00b6
    ``Qwen3ForSequenceClassification``). An RL card's critic and reward-model roles get the same head from
    ``methods.rl.critic_spec_of`` / ``reward_spec_of``; the actor a PPO/GRPO card trains keeps its ``lm_head``."""
    if card.method is Method.RM and spec.head_outputs != 1:
        return replace(spec, head_outputs=1)
    return spec


FLASH_ROTARY_COMPUTE = frozenset({ComputeDtype.BF16, ComputeDtype.FP16})


def flash_rotary_runs(card: RunCard) -> bool:
    """Whether a model whose code calls flash-attn's rotary kernel (``ModelSpec.fused_rotary``: Qwen (1.0)) runs it
    under this card: Qwen (1.0)'s ``_import_flash_attn`` (which binds ``apply_rotary_emb_func``) runs only when
    ``use_flash_attn`` resolves true, and its ``"auto"`` is true only for a bf16 or fp16 model (an fp32 one turns it
    off) with flash-attn importable; ``apply_rotary_pos_emb`` then calls the kernel only on a CUDA tensor
    (modeling_qwen.py shipped with the checkpoints, read in a copy of the Qwen-72B repository: mapengAdam/qianwen-72B
    modeling_qwen.py @3334bfe3d6d9d445cbe54185cd6aaef7e1e3c068 ``QWenLMHeadModel.__init__``'s ``use_flash_attn``
    branch, ``_import_flash_attn``, ``apply_rotary_pos_emb``). The card says it with ``attention: flash`` and
    ``precision.compute`` bf16 / fp16; otherwise the eager rotary ops run."""
    return card.attention is Attention.FLASH and card.precision.compute in FLASH_ROTARY_COMPUTE


def _model_ref(card: RunCard) -> str | dict:
    m = card.model
    if isinstance(m, str):
        return m
    if m.params is not None:
        return {"params": m.params, **({"reference": m.reference} if m.reference is not None else {})}
    ref = m.id or m.path
    if ref is None:
        raise CardError("model: give an id, a path, or params")
    return ref


def _revision(card: RunCard) -> str | None:
    return None if isinstance(card.model, str) else card.model.revision


def model_dtype(card: RunCard) -> ComputeDtype:
    """The dtype the model's unquantised modules and activations are held in: fp32 for a QLoRA model loaded in
    float32 without autocast (``precision.nf4_compute_dtype`` fp32: the embeddings, norms, head and the residual
    stream around the 4-bit linears are fp32, spec.enums.Nf4ComputeDtype), else ``precision.compute``."""
    if card.scope is Scope.QLORA and card.precision.nf4_compute_dtype is Nf4ComputeDtype.FP32:
        return ComputeDtype.FP32
    return card.precision.compute


def gpu_of(card: RunCard) -> GpuSpec:
    hw = card.hardware
    if hw.gpu in ("", "custom"):
        if hw.gpu_memory_gib is None:
            raise CardError("hardware.gpu_memory_gib: required when hardware.gpu is 'custom'")
        return custom_gpu(hw.gpu_memory_gib)
    return resolve_gpu(hw.gpu)


def trainable_spec(card: RunCard) -> TrainableSpec:
    lo = card.lora
    return _trainable(card.scope, lo.rank, lo.alpha, card.lora_targets, lo.dropout, lo.double_quant,
                      4 if lo.adapter_dtype is AdapterDtype.FP32 else 2,
                      lo.dropout_position is LoraDropoutPosition.POST, transformers_v4_modules(card))


def transformers_v4_modules(card: RunCard) -> bool:
    """Whether PEFT wraps the card's model as transformers < 5 builds it (``LoraSpec.transformers_v4``): the card's
    layers are transformers' modelling code (``plan.terms.runs_hf_modelling_code``: not Megatron-Core's or nanotron's)
    and it states transformers < 5, by a ``software.transformers`` pin before 5.0 or ``parallel.moe_experts`` loop /
    loop_all (the per-expert modules only transformers < 5 builds), as ``plan.rl_sync.trainer_fuses_experts`` reads
    the same card. Not where a trainer runs its own experts: prime-rl's ``MultiLoRAGroupedExperts``
    (``lora.expert_adapters: grouped``, adapters held per expert group beside its own grouped experts,
    ``compute.inventory.GROUPED_EXPERT_LORA_BYTES``), grouped_gemm's experts (``grouped_streams``, NeMo Automodel) and
    torchtitan's padded wrapper (``grouped_padded``): a transformers pin does not describe those modules, so their
    adapters and optimizer state stay the trainer's layout."""
    if card.parallel.tensor_parallel_impl in (TensorParallelImpl.MEGATRON, TensorParallelImpl.NANOTRON):
        return False
    if card.lora.expert_adapters is ExpertAdapters.GROUPED or card.parallel.moe_experts in (
            MoeExperts.GROUPED_STREAMS, MoeExperts.GROUPED_PADDED):
        return False
    return card.parallel.moe_experts.is_loop or pin_before(card.software.transformers, (5, 0))


TRANSFORMERS_EXPERT_HIT_TEST_SINCE = (4, 53)
"""The transformers release whose sparse MoE block loops over the hit experts only (``parallel.moe_experts: loop``):
the hit test and the ``ModuleList`` index by a CUDA tensor arrive in the transformers 4.53.0 wheel
(models/qwen3_moe/modeling_qwen3_moe.py ``Qwen3MoeSparseMoeBlock.forward`` l.251-254, ``expert_hitted``); 4.51 and
4.52 loop over every expert by its index (``loop_all``; ``compute.expert_loop``)."""


def transformers_v4_experts(card: RunCard, spec: ModelSpec) -> tuple[RunCard, str | None]:
    """The card with its experts as transformers < 5 runs them, and the plan note saying so; ``(card, None)`` when
    nothing changes.

    transformers 4.x has no grouped experts for the MoE families whose 4.x experts are an ``nn.ModuleList`` of
    per-expert MLPs (``memory.lora.v4_expert_module_list``, the 4.57.6 lines of ``_V4_EXPERT_MODULES``): their
    sparse MoE blocks loop over the experts (``compute.expert_loop``), and PEFT wraps each expert linear
    (``transformers_v4_modules``). A card whose layers are transformers' own modelling code
    (not Megatron-Core's or nanotron's, ``plan.terms.runs_hf_modelling_code``) with a ``software.transformers`` pin
    before 5.0 and ``parallel.moe_experts: grouped`` therefore names experts that model code does not build: given
    explicitly, it is refused (``CardError`` naming the field and the allowed values); left at the default, it
    resolves to the 4.x loop (``loop`` from 4.53, ``loop_all`` for a pin before it,
    ``TRANSFORMERS_EXPERT_HIT_TEST_SINCE``) with a note. A trainer's own grouped experts (``grouped_streams``,
    ``grouped_padded``, prime-rl's ``lora.expert_adapters: grouped``) are left as the card gives them."""
    from trainfit.memory.lora import v4_expert_module_list

    par, pin = card.parallel, card.software.transformers
    if (par.moe_experts is not MoeExperts.GROUPED or card.lora.expert_adapters is not ExpertAdapters.MERGED
            or par.tensor_parallel_impl in (TensorParallelImpl.MEGATRON, TensorParallelImpl.NANOTRON)
            or not pin_before(pin, (5, 0)) or not v4_expert_module_list(spec)):
        return card, None
    if "moe_experts" in par.model_fields_set:
        raise CardError(f"parallel.moe_experts: grouped is transformers 5's experts; with software.transformers {pin}"
                        f" ({spec.name}'s 4.x experts are per-expert modules in a loop) allowed: loop, loop_all")
    loop = MoeExperts.LOOP_ALL if pin_before(pin, TRANSFORMERS_EXPERT_HIT_TEST_SINCE) else MoeExperts.LOOP
    runs_as = f"parallel.moe_experts: transformers {pin} runs {spec.name}'s experts as its per-expert loop ({loop.value})"
    if par.tensor_parallel * par.pipeline_parallel * par.expert_parallel > 1:  # the loop's own limit (card.py)
        raise CardError(f"{runs_as}, which runs without tensor, pipeline or expert parallel; allowed:"
                        " parallel.tensor_parallel, pipeline_parallel and expert_parallel 1, software.transformers"
                        " >= 5, or a trainer's own experts (parallel.moe_experts grouped_streams or grouped_padded)")
    try:
        resolved = card_with(card, parallel__moe_experts=loop.value)
    except ValidationError as exc:
        raise CardError(f"{runs_as}, which this card cannot run: {format_validation_error(exc)}") from None
    except (ValueError, CardError) as exc:
        raise CardError(f"{runs_as}, which this card cannot run: {' '.join(str(exc).split())}") from None
    return resolved, (f"parallel.moe_experts: {loop.value} (the grouped default resolved): transformers {pin} builds"
                      f" {spec.name}'s routed experts as per-expert nn.Linear modules its MoE block loops over; PEFT"
                      " wraps each expert linear")


@lru_cache(maxsize=1024)
def _trainable(scope, rank, alpha, targets, dropout, double_quant, adapter_bytes,  # noqa: ANN001
               dropout_post=False, transformers_v4=False) -> TrainableSpec:  # noqa: ANN001
    if scope.value == "full":
        return TrainableSpec(scope=scope)
    lora = LoraSpec(rank=rank, alpha=alpha, targets=targets, dropout=dropout, double_quant=double_quant,
                    adapter_dtype_bytes=adapter_bytes, dropout_post=dropout_post and dropout > 0,
                    transformers_v4=transformers_v4)
    return TrainableSpec(scope=scope, lora=lora)


def price_of(card: RunCard):
    from trainfit.compute.cost import Price, price_preset

    from trainfit.compute.cost import for_gpu

    hw = card.hardware
    if hw.price_preset:
        price = price_preset(hw.price_preset)
        try:  # a catalog price is for one GPU kind: never the card's other kind
            return for_gpu(price, gpu_of(card).id)
        except CardError as exc:
            raise CardError(f"hardware.price_preset: {exc}") from None
    if hw.price_per_gpu_hour is None:
        return None
    return Price(per_gpu_hour=hw.price_per_gpu_hour, currency=hw.currency or "", gpu=gpu_of(card).id,
                 gpus_per_instance=hw.price_gpus_per_instance or 1)


def card_with(card: RunCard, **paths: object) -> RunCard:
    """A copy of the card with fields replaced (``batch__seq_len`` sets ``batch.seq_len``), validated again."""
    from trainfit.spec.dotted import set_dotted

    data = card.model_dump(mode="json", exclude_unset=True)
    for key, value in paths.items():
        set_dotted(data, key.replace("__", "."), value)
    return RunCard.model_validate(data)
