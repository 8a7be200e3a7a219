"""Rollout time of transformers' ``generate`` on the trained model (``rollout.engine: hf``): one static batch per rank,
eager kernels, no continuous batching.

What ``generate`` does (transformers 5.24.0 from PyPI, read 2026-12-05; ``GenerationMixin._sample``,
transformers/generation/utils.py):

* **Static batch.** The rank's prompts, left-padded to the longest, run as one tensor. A finished sequence keeps its
  row (``next_tokens * unfinished_sequences + pad_token_id * (1 - unfinished_sequences)``, l.3283-3288) until every
  row is done or
  ``max_new_tokens`` is reached (``while self._has_unfinished_sequences(...)``): every step runs the whole batch and
  no new sequence takes a finished one's place. The batch decodes for its longest response; with several ranks the
  step waits for the rank holding the longest of all (``compute.response_lengths.slowest_engine_length_groups``,
  its top group).
* **Padded KV.** The default ``DynamicCache`` concatenates one token per row per step: every row's cache is
  ``prompt + t`` long at step ``t``, finished rows included, and attention reads all of it.
* **Eager.** No CUDA graphs unless the caller compiles (``cache_implementation="static"`` with ``torch.compile``;
  neither TRL nor a plain ``generate`` call sets it): every kernel is launched from Python each step at the
  rates' ``host_s_per_forward_kernel`` (``decode_step.eager_s_per_kernel_of``), and the loop reads
  ``unfinished_sequences.max() == 0`` on the host each step (``StopCheck.__call__``, l.385-396; the deferred check
  that would not block is taken on ``mps`` only, ``DeferredStopCheck.is_supported`` l.440-447), so the host cannot queue
  steps ahead: a step is the larger of its launches and its device time, plus the sampling loop's own kernels
  (``HF_SAMPLE_STEP_KERNELS``: TRL always samples; counted at transformers 4.47.1 for a Qwen2-family model).

The device side of a step is ``decode_step.decode_step_seconds`` (weights streamed once, the KV read, the per-token
FLOPs) at the batch and its padded context, with no engine host terms (no scheduler, no frontend). Prefill: the
batch's padded prompts in one forward, ``2 x matmul params x tokens`` at the matmul rate, or the weight read.

**A sharded trainer's forwards.** ``generate`` runs the training model's own modules, so under torch FSDP every
forward, the prefill and each decode step, runs each unit's pre- and post-forward hooks. TRL wraps the call in
``unwrap_model_for_generation`` and ``summon_full_params(self.model_wrapped, recurse=False)`` (trl 1.16.0 from PyPI,
read 2026-12-05: trl/trainer/grpo_trainer.py l.1861-1875): that gathers the root unit alone under FSDP1 and nothing
under FSDP2 (``summon_full_params`` is a no-op there, trl/distributed.py l.74-91), so under FULL_SHARD / HYBRID_SHARD
each decoder layer unit is all-gathered in its pre-forward and freed after it, every step
(``layer_gathers``: ``collectives.exposed_forward_gathers``' arguments, priced for each forward with the layer's share
of that forward's seconds hiding the next layer's gather, as a training forward's). transformers runs the loop with
``synced_gpus`` under FSDP (``is_fsdp_managed_module``, transformers 5.24.0 generation/utils.py l.2566-2567): a rank
whose rows are done keeps stepping until every rank is, the steps of the slowest rank that the caller already
counts. The units' hooks are host work on a step the host cannot queue ahead of (``unit_host_s_per_forward``,
``training.fsdp_unit_host_seconds`` of a no-grad forward per unit), added to each forward. Only ZeRO-3 with TRL's
``ds3_gather_for_generation`` (its default) gathers the whole model once per call and removes DeepSpeed's hooks for
it (trl/models/utils.py l.141-150), as does SHARD_GRAD_OP's first forward (its units are not resharded after forward):
that once-a-call gather is the weight sync's (``plan.rl_sync.hf_shared_weights``), none here.

**A PEFT policy.** ``generate`` runs the PEFT model being trained, unmerged and in train mode: the Trainer's
``training_step`` calls ``model.train()`` before ``_prepare_inputs`` (transformers 5.24.0 trainer.py l.2080-2084),
from which TRL generates, and its non-vLLM path never calls ``eval()`` or ``merge_adapter`` (trl 1.16.0
grpo_trainer.py l.1861-1875). So every adapted linear runs ``result + lora_B(lora_A(dropout(x))) * scaling``
(peft 0.21.2 peft/tuners/lora/layer.py l.1102; bitsandbytes' ``Linear4bit`` l.266-269 of peft/tuners/lora/bnb.py)
in every forward: ``peft_lora_forward_kernels``, the training inventory's counts (``inventory.LORA_EXTRA_KERNELS``,
the fp32 adapters' two casts, ``inventory.LORA_DROPOUT_KERNELS`` where ``lora_dropout`` is an ``nn.Dropout``),
launched from Python at the eager rate like the rest of the step (``adapter_kernels_per_forward``). A QLoRA base
(bitsandbytes ``Linear4bit``) under ``torch.no_grad`` runs ``torch.ops.bitsandbytes.gemm_4bit``, whose CUDA dispatch
takes its fused kernel on the packed 4-bit weights for at most 512 rows of a large weight and dequantises the whole
weight and calls ``F.linear`` above that (bitsandbytes 0.50.2 autograd/_functions.py l.453-472, backends/cuda/ops.py
``_gemm_4bit_use_custom_cuda`` l.677-679, ``_dequant_linear_fallback`` l.904-916): a decode step of a few rows streams
the 4-bit weights (the caller's ``weight_bytes``), the prefill's ``batch x prompt`` rows dequantise
(``prefill_extra_bytes``: ``inventory.NF4_DEQUANT_BYTES_PER_WEIGHT`` per quantised weight, at the HBM rate). Before
bitsandbytes 0.50 (a ``software.bitsandbytes`` pin, ``plan.rl_generation.bnb_dequantises_per_call``) every call of two
or more rows dequantises the whole weight and reads the 16-bit copy (``compute.bnb_decode``): the prefill's
dequantisation whatever its rows, and each decode step of a batch streams ``decode_weight_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainfit.compute.collectives import exposed_forward_gathers
from trainfit.compute.decode_step import decode_step_seconds, eager_s_per_kernel_of
from trainfit.compute.inventory import LORA_DROPOUT_KERNELS, LORA_EXTRA_KERNELS
from trainfit.compute.rates import DeviceRates
from trainfit.errors import CardError
from trainfit.spec.enums import RolloutEngine
from trainfit.spec.model import ModelSpec

DECODE_POINTS = 16
"""Midpoints at which the growing context is sampled to sum the decode steps (the step is linear in the context
within a bound, so a few points suffice)."""


HF_SAMPLE_STEP_OPS = {
    "prepare_inputs_for_generation": 6,
    "embedding": 1,
    "sdpa_ignore_causal_mask_check": 2,
    "sdpa_causal_mask": 13,
    "rotary_cos_sin": 8,
    "final_norm": 8,
    "lm_head": 1,
    "update_model_kwargs": 3,
    "logits_copy": 2,
    "temperature_top_k": 4,
    "softmax_multinomial": 2,
    "finished_blend_and_append": 5,
    "stopping_criteria_and_flag": 9,
}
"""Kernel-launching torch ops of one sampled decode step of transformers' ``generate`` outside the decoder layers, as
TRL calls it (``GenerationConfig(do_sample=True, temperature, num_return_sequences, max_new_tokens)``: huggingface/trl
trl/trainer/grpo_trainer.py l.331-337 @49711efab9e0cc3762d3228c9fd5a8064d489503, v0.14.0), counted in transformers
4.47.1 (the wheel from PyPI, read 2026-12-05) for a Qwen2 model with sdpa attention and a left-padded batch:

* ``prepare_inputs_for_generation`` (transformers/generation/utils.py l.349-430): the input ids' contiguous clone,
  the position ids from the mask (cumsum, minus one, ``== 0``, ``masked_fill_``) and their contiguous clone: 6.
* the token embedding: 1.
* the SDPA mask check before the mask is built (transformers/models/qwen2/modeling_qwen2.py l.960
  ``AttentionMaskConverter._ignore_causal_mask_sdpa``; transformers/modeling_attn_mask_utils.py l.284
  ``torch.all(attention_mask == 1)``): eq, all: 2. The ``elif`` then reads the result on the host, a blocking
  device-to-host read every step; the loop's stopping flag is one too (``this_peer_finished`` set at utils.py l.3311, read by
  ``_has_unfinished_sequences`` l.2450). The decode step
  has no term for a per-step host read (``decode_step_seconds`` prices the eager step's launches, not a host that
  waits for the device), so neither read is priced: only the two kernels are counted.
* the 4-D mask, rebuilt every step because the padded batch's 2-D mask is not all ones
  (transformers/models/qwen2/modeling_qwen2.py ``_update_causal_mask`` l.934-1008,
  ``_prepare_4d_causal_attention_mask_with_cache_position`` l.1050-1074): ``torch.full``, ``arange > cache_position``
  (arange, gt), ``causal_mask *=``, the contiguous clone, the padding add, ``== 0``, ``masked_fill`` and its slice
  copy; then ``AttentionMaskConverter._unmask_unattended`` (l.1005: eq, all, not, mul): 13 (no sliding-window mask:
  ``Qwen2Config`` keeps ``sliding_window`` None unless ``use_sliding_window``, configuration_qwen2.py l.172).
* the rotary table (``Qwen2RotaryEmbedding.forward``, l.150-170): the position ids' float cast, the matmul, the cat,
  cos, sin, the two attention-scaling muls and the two casts: 8.
* the final ``Qwen2RMSNorm`` (float cast, pow, mean, add, rsqrt, mul, cast back, weight mul): 8; the head on the last
  position (``num_logits_to_keep``): 1.
* ``_update_model_kwargs_for_generation`` (utils.py l.765-800): the mask's ``new_ones`` and cat, the cache position's
  add: 3.
* ``_sample`` (utils.py l.3244-3311): the last logits' clone and float cast (l.3267): 2; the logits processors
  TRL's config builds (l.1058-1061 of ``_get_logits_processor``): ``TemperatureLogitsWarper`` (one divide,
  transformers/generation/logits_process.py l.304) and ``TopKLogitsWarper`` at GenerationConfig's default top_k 50
  (transformers/generation/configuration_utils.py l.422; topk, lt, masked_fill, logits_process.py l.532): 4;
  softmax and ``torch.multinomial`` (l.3297): 2; the finished-row blend (l.3303: mul, rsub, mul, add) and the append
  (l.3306: cat): 5; the stopping criteria and the flag (l.3310-3311; transformers/generation/stopping_criteria.py
  ``MaxLengthCriteria`` l.77-84 ``torch.full``, ``EosTokenCriteria`` l.466 ``isin``, ``StoppingCriteriaList`` l.494-497
  ``torch.full`` and two ors; not, and, max, eq): 9.

64 in all, where ``hybrid_engine.HF_GREEDY_STEP_KERNELS`` (28) counts transformers 4.28's greedy OPT loop (DeepSpeed-
Chat's generate, which does not sample). Other transformers releases restructure the mask (5.x builds it in
``masking_utils``) and are planned with this count."""
HF_SAMPLE_STEP_KERNELS = sum(HF_SAMPLE_STEP_OPS.values())


FP32_ADAPTER_CAST_KERNELS = 2
"""An fp32 adapter's casts per adapted call, the input up and the output down, as the training inventory counts them
(``inventory.step_inventory``: ``LORA_EXTRA_KERNELS + 2`` for adapters of 4 bytes): PEFT's ``Linear.forward`` casts
the input to the adapter's dtype (``self._cast_input_dtype(x, lora_A.weight.dtype)``) and adds the result back in the
base output's dtype (peft/tuners/lora/layer.py, peft 0.21.2)."""


def peft_lora_forward_kernels(*, adapted_linears: float, adapter_dtype_bytes: int, dropout: bool) -> float:
    """Kernels PEFT's unmerged LoRA adds to one forward over ``adapted_linears`` adapted linear calls: ``lora_A`` and
    ``lora_B`` (two GEMMs), the scaling mul and the add (``LORA_EXTRA_KERNELS``), the fp32 adapters' casts
    (``FP32_ADAPTER_CAST_KERNELS``, ``adapter_dtype_bytes`` >= 4) and, with ``dropout`` in train mode,
    ``LORA_DROPOUT_KERNELS`` (module docstring, "A PEFT policy")."""
    if adapted_linears < 0:
        raise CardError("static generation: adapted_linears >= 0")
    per = 2 + LORA_EXTRA_KERNELS + (FP32_ADAPTER_CAST_KERNELS if adapter_dtype_bytes >= 4 else 0) + (
        LORA_DROPOUT_KERNELS if dropout else 0)
    return float(adapted_linears * per)


@dataclass(frozen=True, slots=True)
class StaticGenerationTime:
    """Seconds of one rank's generate calls (every rank runs its own in parallel; the slowest sets the phase)."""

    prefill_s: float
    decode_s: float
    total_s: float
    decode_steps: float
    """Steps of one call: the longest response of the step (static batch: no early exit for the others)."""
    batch_sequences: int
    bound: str
    """What paces the mean decode step: ``launch`` (the eager host), ``bandwidth`` or ``compute``."""
    gathers_s: float = 0.0
    """Of ``total_s``: the per-layer all-gathers each forward leaves exposed (``layer_gathers``)."""
    hooks_s: float = 0.0
    """Of ``total_s``: the sharded units' forward hooks on the host (``unit_host_s_per_forward``)."""
    adapter_s: float = 0.0
    """Of ``total_s``: the decode steps' adapter kernel launches (``adapter_kernels_per_forward``; the prefill, priced
    by its FLOPs or weight read, launches them too, not counted apart)."""
    dequant_s: float = 0.0
    """Of ``total_s``: the prefill's extra HBM traffic (``prefill_extra_bytes``: a 4-bit base's dequantisation)."""


def static_batch_generation_time(
    *, spec: ModelSpec, matmul_params: float, rates: DeviceRates, calls: int, batch_sequences: int,
    prompt_len_padded: int, response_len_longest: float, weight_bytes: float, kv_bytes_per_token: float,
    layer_gathers: dict[str, Any] | None = None, unit_host_s_per_forward: float = 0.0,
    adapter_kernels_per_forward: float = 0.0, prefill_extra_bytes: float = 0.0,
    decode_weight_bytes: float | None = None,
) -> StaticGenerationTime:
    """``calls`` sequential ``generate`` calls on one rank, each a static batch of ``batch_sequences`` prompts
    left-padded to ``prompt_len_padded`` tokens, decoding ``response_len_longest`` steps (module docstring).
    ``weight_bytes``: the model as the rank runs it (whole: ``generate`` runs the unsharded model);
    ``kv_bytes_per_token``: one token's KV over all layers. ``layer_gathers``: the sharded decoder units gathered in
    every forward, ``collectives.exposed_forward_gathers``' keyword arguments but ``layer_forward_s`` (None: none, an
    unsharded model or one gathered once per call); ``unit_host_s_per_forward``: the units' hooks, host seconds per
    forward (module docstring, "A sharded trainer's forwards"); ``adapter_kernels_per_forward``: PEFT's kernels
    (``peft_lora_forward_kernels``) launched in every forward, ``prefill_extra_bytes``: HBM bytes the prefill moves
    beyond its GEMMs (a 4-bit base's dequantisation; module docstring, "A PEFT policy"); ``decode_weight_bytes``: the
    weight bytes one decode step streams where they differ from ``weight_bytes`` (bitsandbytes before 0.50,
    ``compute.bnb_decode``; None: ``weight_bytes``). Raises ``CardError`` for a count below 1 or negative
    lengths."""
    if min(calls, batch_sequences) < 1 or prompt_len_padded < 0 or response_len_longest < 0:
        raise CardError("static generation: calls and batch_sequences >= 1, lengths >= 0")
    eager_s = eager_s_per_kernel_of(rates, RolloutEngine.HF, spec=spec)
    prefill_tokens = batch_sequences * prompt_len_padded
    adapter_host_s = adapter_kernels_per_forward * eager_s
    dequant_s = prefill_extra_bytes / rates.hbm_bytes_per_s
    prefill_s = max(2.0 * matmul_params * prefill_tokens / rates.matmul_flops_per_s,
                    weight_bytes / rates.hbm_bytes_per_s) + dequant_s + unit_host_s_per_forward

    def exposed_s(forward_s: float) -> float:
        # the next layer's gather hides behind this layer's share of the forward (FSDP's forward, as in training)
        if layer_gathers is None:
            return 0.0
        return exposed_forward_gathers(**layer_gathers, layer_forward_s=forward_s / max(1, layer_gathers["layers"]))

    gathers_s = exposed_s(prefill_s)
    prefill_s += gathers_s
    steps = max(1.0, response_len_longest)
    decode_s, bounds = 0.0, {"bandwidth": 0.0, "compute": 0.0, "launch": 0.0}
    for i in range(DECODE_POINTS):
        t = prompt_len_padded + steps * (i + 0.5) / DECODE_POINTS
        d = decode_step_seconds(
            spec=spec, matmul_params=matmul_params, rates=rates, tp=1, batch=batch_sequences,
            context_tokens=batch_sequences * t,
            weight_bytes=weight_bytes if decode_weight_bytes is None else decode_weight_bytes,
            kv_bytes_per_token=kv_bytes_per_token, cuda_graphs=False, engine_generation="v0",  # in-process: no engine frontend
            engine_s_per_step=HF_SAMPLE_STEP_KERNELS * eager_s + unit_host_s_per_forward + adapter_host_s,
            engine_s_per_sequence=0.0,
            eager_s_per_kernel=eager_s)
        step_gathers_s = exposed_s(d.total_s)
        gathers_s += step_gathers_s * steps / DECODE_POINTS
        decode_s += (d.total_s + step_gathers_s) * steps / DECODE_POINTS
        device = max(d.bandwidth_s + d.kernel_gaps_s, d.compute_s)
        key = "launch" if d.launch_s + d.engine_s > device else (
            "bandwidth" if d.bandwidth_s >= d.compute_s else "compute")
        bounds[key] += d.total_s
    total = calls * (prefill_s + decode_s)
    return StaticGenerationTime(prefill_s=calls * prefill_s, decode_s=calls * decode_s, total_s=total,
                                decode_steps=steps, batch_sequences=batch_sequences,
                                bound=max(bounds, key=bounds.get), gathers_s=calls * gathers_s,
                                hooks_s=calls * unit_host_s_per_forward * (1.0 + steps),
                                adapter_s=calls * adapter_host_s * steps, dequant_s=calls * dequant_s)
