"""What every phase of an RL step reads: the step's prompt and response lengths, the prompts generated per
step (``generated_prompts``: dynamic sampling's extra prompts too), the engine's bf16 weights, the trainer's
HSDP shard group, and the phase record itself.

Pure: no torch.
"""

from __future__ import annotations

from trainfit.compute.response_lengths import (
    LengthProfile,
    clip_ratio_response_mean,
    default_response_mean,
    profile_named,
)
from trainfit.compute.training import PhaseTime
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import weight_bytes
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    ComputeDtype,
    Dtype,
    Strategy,
)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec


def rl_phase(name: str, seconds: float, bound: str, **terms: float) -> PhaseTime:
    """One phase of the step: ``seconds`` in all, what bounds it, and its terms (seconds each)."""
    return PhaseTime(name, seconds, bound, dict(terms))


def hsdp_shard_of(card: RunCard, sharding: Sharding) -> int:
    """Strategy hsdp: the ranks one parameter is sharded over, the memory's ``sharding.shard_group``
    (``parallel.hsdp_shard_size``, else the training GPUs of one host, ``hardware.gpus_per_node``, also on GB200
    NVL72 where the collectives' "node" is the 72-GPU NVLink domain: the frameworks build the group per host, FSDP1
    ``HYBRID_SHARD`` from ``device_count()``, pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb
    ``torch/distributed/fsdp/_init_utils.py`` l. 162, and verl / torchtitan pass ``init_device_mesh`` a
    ``(replicate, shard)`` shape, ``compute.training.hsdp_links``); 0 for every other strategy."""
    return sharding.shard_group if card.parallel.strategy is Strategy.HSDP else 0


def bf16_engine_weight_bytes(spec: ModelSpec) -> float:
    """The whole model in bf16, as the engine holds and the sync sends it."""
    return weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base


def generated_prompts(card: RunCard) -> int:
    """Prompts the engine generates per step: ``rollout.generated_prompts_per_step`` where the trainer keeps only
    ``prompts_per_step`` of them (DAPO dynamic sampling: NeMo RL's dataloader batch is ``num_prompts_per_step x
    batch_multiplier`` prompts, each generation batch is generated whole and the groups whose rewards all agree are
    dropped, NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py setup l.256-264 and dynamic_sampling l.766-892
    @9dbd9adc95a10f5946cceb36e1d5b31e2429e470), else ``prompts_per_step``."""
    ro = card.rollout
    return ro.generated_prompts_per_step or ro.prompts_per_step


def response_mean(card: RunCard, spec: ModelSpec | None = None) -> float:
    """The card's mean response tokens; without one, the default of the length profile
    (``length_profile``: the card's ``rollout.length_profile``, by the model name under ``auto``;
    ``compute.response_lengths.default_response_mean``: a truncated exponential of the profile's natural
    scale, clipped at ``response_len``), not a fixed share of the maximum; with ``rollout.response_clip_ratio`` the
    exponential whose share at the cap is that ratio (``compute.response_lengths.clip_ratio_response_mean``)."""
    ro = card.rollout
    if ro.response_len_mean:
        return float(ro.response_len_mean)
    if ro.response_clip_ratio is not None:  # the published share at the cap sets the exponential's scale
        return clip_ratio_response_mean(response_len_max=ro.response_len, clip_ratio=ro.response_clip_ratio)
    return default_response_mean(response_len_max=ro.response_len, profile=length_profile(card, spec))


def published_lengths(card: RunCard) -> dict[str, float | None]:
    """The card's published share cut at the cap and batch's longest response beside its mean
    (``rollout.response_clip_ratio``, ``rollout.response_len_batch_max``), as the keyword arguments
    ``compute.response_lengths.response_length_groups`` takes them; none without a mean (the ratio then sets the
    mean, ``response_mean``, and the default shape stands)."""
    ro = card.rollout
    if not ro.response_len_mean:
        return {}
    return {"clip_ratio": ro.response_clip_ratio, "longest_tokens": ro.response_len_batch_max}


def length_profile(card: RunCard, spec: ModelSpec | None = None) -> LengthProfile:
    """The response-length profile a card without ``rollout.response_len_mean`` plans with
    (``compute.response_lengths.profile_named``)."""
    return profile_named(card.rollout.length_profile, model_name=spec.name if spec else None)


def prompt_mean(card: RunCard) -> float:
    """Mean prompt tokens one sequence carries through generation and the passes that drop padding:
    ``rollout.prompt_len_mean`` when the card gives it, else ``rollout.prompt_len`` (every prompt at the maximum, an
    upper bound). verl (``use_remove_padding``), OpenRLHF (``packing_samples``) and NeMo RL (sequence packing) run
    their log-prob and update passes on the real tokens, and vLLM prefills and attends to the prompt as tokenized;
    memory, KV capacity and padded passes keep the maximum (``RunCard.rollout`` field docs)."""
    ro = card.rollout
    return float(ro.prompt_len_mean or ro.prompt_len)


ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang"}
"""How a summary names the engine whose host constants a calibration applies (vLLM's V0 engine: "vLLM V0")."""


def engine_host_fields_read(card: RunCard) -> tuple[str, ...]:
    """The calibration's engine host constants (``compute.rates.ENGINE_HOST_FIELDS``) the generation phase of
    ``card`` reads, as ``rl_generation.generation_phase`` passes them to ``compute.decode_step``'s step model: every
    engine reads ``engine_s_per_step``; vLLM's V1 engine and SGLang ``engine_s_per_sequence``, ``frontend_s_per_step`` and
    ``frontend_s_per_sequence``, plus ``frontend_cumulative_s_per_sequence`` when their frontend streams cumulative
    outputs (``engine_outputs``; null: with ``engine_multiprocess``); vLLM's V0 engine ``engine_v0_s_per_sequence``
    and no frontend term (``engine_s_per_sequence_for``, ``_step_model``); each engine its own eager price per kernel
    (``eager_s_per_kernel_of``). transformers ``generate`` (``hf``, ``compute.static_generation``) and DeepSpeed's
    Hybrid Engine read none, nor does a card that generates nothing."""
    from trainfit.spec.enums import EngineOutputs, RolloutEngine

    if card.method.value not in ("ppo", "grpo") or card.rollout.engine.value not in ENGINE_LABELS:
        return ()
    ro = card.rollout
    eager = "sglang_eager_s_per_kernel" if ro.engine is RolloutEngine.SGLANG else "vllm_eager_s_per_kernel"
    if ro.engine is RolloutEngine.VLLM and str(ro.vllm_engine) == "v0":
        return ("engine_s_per_step", "engine_v0_s_per_sequence", eager)
    cumulative = ro.engine_multiprocess if ro.engine_outputs is None else ro.engine_outputs is EngineOutputs.CUMULATIVE
    return ("engine_s_per_step", "engine_s_per_sequence", "frontend_s_per_step", "frontend_s_per_sequence",
            *(("frontend_cumulative_s_per_sequence",) if cumulative else ()), eager)


def engine_label(card: RunCard) -> str | None:
    """The engine ``engine_host_fields_read`` reads for, as a summary names it; None when it reads none."""
    if not engine_host_fields_read(card):
        return None
    v0 = card.rollout.engine.value == "vllm" and str(card.rollout.vllm_engine) == "v0"
    return ENGINE_LABELS[card.rollout.engine.value] + (" V0" if v0 else "")
