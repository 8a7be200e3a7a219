"""The generation side of an RL step: the rollout engine's generation (vLLM / SGLang, ``compute.generation``;
DeepSpeed's Hybrid Engine, ``compute.hybrid_engine``) and the reward of each completion.

Pure: no torch.
"""

from __future__ import annotations

import re
from math import ceil

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute import collectives as coll
from trainfit.compute.rates import DeviceRates, group_rates
from trainfit.compute.training import PhaseTime
from trainfit.methods.roles import (
    group_sizes,
    rollout_nodes,
)
from trainfit.plan.rl_common import (
    bf16_engine_weight_bytes,
    generated_prompts,
    prompt_mean,
    published_lengths,
    response_mean,
    rl_phase,
)
from trainfit.plan.time import nic_bytes_per_s
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    AsyncMode,
    EngineOutputs,
    RolloutEngine,
    Strategy,
)
from trainfit.spec.model import ModelSpec


def quantized_engine_inputs(card: RunCard, spec: ModelSpec, r: DeviceRates) -> dict[str, float]:
    """What ``rollout.quantization`` changes in the engine's generation time (``compute.generation``): the weight
    bytes one rank reads per decode step (1-byte fp8 linears and experts with their block scales,
    ``rollout.quantization``), the routed experts' bytes per weight, and the rate of the per-token matmuls: the fp8
    GEMMs at ``fp8_matmul_flops_per_s``, the head and the bf16 modules at the bf16 rate
    (``rollout.quantization.linear_flops_per_s``). Empty without quantization (bf16 defaults)."""
    from trainfit.rollout import quantization as q

    ro = card.rollout
    if not q.is_quantized(ro.quantization):
        return {}
    kept = tuple(ro.quantization_bf16_modules)
    share = q.fp8_matmul_share(spec, quantization=ro.quantization, bf16_modules=kept)
    return {
        "rank_weight_bytes": q.card_engine_rank_bytes(card, spec),
        "expert_bytes_per_param": q.routed_expert_bytes_per_param(spec, quantization=ro.quantization,
                                                                  bf16_modules=kept),
        "linear_flops_per_s": q.linear_flops_per_s(bf16_flops_per_s=r.matmul_flops_per_s,
                                                   fp8_flops_per_s=r.fp8_matmul_flops_per_s, fp8_share=share),
    }


BNB_GEMM_4BIT_FUSED_SINCE = (0, 50)
"""The first bitsandbytes release with a fused ``gemm_4bit`` kernel for short row counts (``memory.nf4_dequant``
``FALLBACK_SINCE``; bitsandbytes/backends/cuda/ops.py ``_gemm_4bit_use_custom_cuda`` l.584
@c5d481be1be2b04c7859bc6753268d4e7b748ee3, the 0.50.0 tag, absent at the 0.49.0 tag 26f0c7a9): before it, a 4-bit linear of two or more rows dequantises its whole weight
every call (``compute.bnb_decode``)."""


BNB_UNPINNED_ASSUMPTION = (
    "bitsandbytes 4-bit generation: with no software.bitsandbytes pin, 0.50 or later is planned (matmul_4bit under no_grad"
    " runs the fused gemm_4bit on the packed 4-bit weights, up to 512 rows, in transformers' generate and in Unsloth's"
    " vLLM engine alike); a pin before 0.50 plans its dequantise-then-GEMM: every 4-bit weight dequantised to 16 bits and"
    " read back in each forward of two or more rows"
)
"""The one assumption both bitsandbytes 4-bit generation paths share (``hf_peft_inputs``, ``bnb_engine_inputs``): an
unpinned card is planned at the newest bitsandbytes read, as an unpinned framework is elsewhere. bitsandbytes 0.50.0
(bitsandbytes-foundation/bitsandbytes @c5d481be1be2b04c7859bc6753268d4e7b748ee3) ``matmul_4bit`` sends a no-grad call
to ``torch.ops.bitsandbytes.gemm_4bit`` (bitsandbytes/autograd/_functions.py l.453-471), whose CUDA dispatch keeps the
fused kernel up to ``GEMM_4BIT_FUSED_MAX_ROWS`` rows; the plan's assumptions state it (``plan.assumptions``)."""


def bnb_dequantises_per_call(card: RunCard) -> bool:
    """True for a ``software.bitsandbytes`` pin before ``BNB_GEMM_4BIT_FUSED_SINCE`` (``spec.card.pin_before``): its
    ``matmul_4bit`` dequantises the whole 4-bit weight for any call of two or more rows (``compute.bnb_decode``).
    False unpinned (``BNB_UNPINNED_ASSUMPTION``) or from 0.50."""
    from trainfit.spec.card import pin_before

    pin = (card.software.model_extra or {}).get("bitsandbytes")
    return pin is not None and pin_before(str(pin), BNB_GEMM_4BIT_FUSED_SINCE)


def _bnb_split_bytes(spec: ModelSpec) -> tuple[float, float]:
    """(4-bit linear weights, bytes of the 16-bit rest: embedding, lm_head, norms) of the whole model."""
    from trainfit.memory.params import param_breakdown
    from trainfit.memory.weights import count_scale, quantized_linear_params

    scale = count_scale(spec)
    quantized = quantized_linear_params(spec)
    return quantized * scale, (param_breakdown(spec).total - quantized) * 2.0 * scale


def bnb_engine_inputs(card: RunCard, spec: ModelSpec) -> dict[str, float]:
    """The decode weight stream of an engine whose linears are bitsandbytes 4-bit (``compute.bnb_decode``): the
    Unsloth preset under QLoRA (its engine holds the trainer's one NF4 copy, ``methods.unsloth`` 1.). With a
    ``software.bitsandbytes`` pin before ``BNB_GEMM_4BIT_FUSED_SINCE`` (``bnb_dequantises_per_call``):
    ``rank_weight_bytes`` a step of two or more sequences (every quantized linear dequantised, then read 16-bit),
    ``one_row_rank_weight_bytes`` a step of one (``gemv_4bit`` on the packed weight). Unpinned or from 0.50
    (``BNB_UNPINNED_ASSUMPTION``): ``rank_weight_bytes`` the stored base (``plan.time.gathered_weight_bytes_of``: the
    packed weights with their quantization state and the 16-bit rest), which the fused ``gemm_4bit`` streams, the
    same base bytes ``hf_peft_inputs`` plans transformers' ``generate`` on. One GPU (the preset refuses more), so the rank holds the whole model. Empty for any other engine
    (an fp8 engine over a QLoRA base is refused, ``methods.unsloth.UNSLOTH_FP8_QLORA_REFUSAL``)."""
    from trainfit.compute.bnb_decode import bnb_4bit_step_weight_bytes
    from trainfit.methods.unsloth import engine_shares_trainer_weights
    from trainfit.spec.enums import Dtype

    if not (engine_shares_trainer_weights(card.preset) and card.weights_dtype is Dtype.NF4):
        return {}
    if not bnb_dequantises_per_call(card):
        from trainfit.plan.time import gathered_weight_bytes_of

        return {"rank_weight_bytes": gathered_weight_bytes_of(card, spec).base}
    quantized, kept_bytes = _bnb_split_bytes(spec)
    return {"rank_weight_bytes": bnb_4bit_step_weight_bytes(quantized_weights=quantized,
                                                            unquantized_bytes=kept_bytes, rows=2),
            "one_row_rank_weight_bytes": bnb_4bit_step_weight_bytes(quantized_weights=quantized,
                                                                    unquantized_bytes=kept_bytes, rows=1)}


def _kv_pool(rollout) -> dict[str, float | None]:
    """The engine's KV capacity as ``generation_time`` admits sequences into it: vLLM's logged token capacity, or
    for a hybrid model the attention tokens of its usable blocks with each sequence's state blocks on top
    (``methods.rl.RolloutSummary.state_tokens_per_seq``)."""
    if rollout.state_tokens_per_seq:
        return {"kv_capacity_tokens": rollout.attention_kv_capacity_tokens,
                "state_tokens_per_seq": rollout.state_tokens_per_seq}
    return {"kv_capacity_tokens": rollout.kv_capacity_tokens or None}


_SGLANG_RELEASE_PIN = r"(?:==)?\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+\-]?(?:post|rc|dev)\d*|[.+\-]\d+)*"
"""A release pin and its suffixes (``.post2``, ``rc1``, ``.dev0``, ``.1``). Each repetition of the tail is a
``post``/``rc``/``dev`` literal (after an optional separator) or a separator followed by at least one digit, so every
pin has one parse and a long pin that does not match fails in linear time (the earlier all-optional repetition,
``(?:[.+\\-]?(?:post|rc|dev)?\\d*)*``, backtracked exponentially: 35 s for ``0.4.0`` + 24 ones + ``!``)."""


def sglang_release(pin) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a ``software.sglang`` release pin (``0.4.0.post2``, ``==0.5.6``, ``v0.4.4``); None
    for anything else (no pin, a branch, a commit hash, a bound)."""
    m = re.fullmatch(_SGLANG_RELEASE_PIN, str(pin).strip()) if pin else None
    return None if m is None else (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


SGLANG_OVERLAP_DEFAULT_SINCE = (0, 3, 6)
"""The first SGLang release whose overlap scheduler is on unless ``--disable-overlap-schedule``: 0.3.6
(``ServerArgs.disable_overlap_schedule: bool = False``, ``--enable-overlap-schedule`` deprecated "It is enabled by
default now", sglang/srt/server_args.py l.127, l.705-707 of the 0.3.6 wheel, 2024-11-22,
https://pypi.org/project/sglang/0.3.6/, read 2026-12-03; sgl-project/sglang#2067 "Enable overlap by default", merged
2024-11-18). 0.3.5 has it off unless asked (``enable_overlap_schedule: bool = False``, l.121 of its wheel)."""

SGLANG_NEWEST_RELEASE_READ = (0, 5, 6)
"""The newest SGLang release whose defaults were read (``decode_step.sglang_cuda_graph_max_batch``): a card that pins
no ``software.sglang`` is planned at it, as an unpinned framework is planned at its newest release elsewhere."""


VLLM_FA3_ONE_MMA_WG_SINCE = (0, 8, 5)
"""The first vLLM release whose V1 FlashAttention backend hands the query and KV head counts to FlashAttention-3's
scheduler metadata, so a decode batch runs the single-warpgroup 64-row tile (vllm-project/vllm PR #16864,
https://github.com/vllm-project/vllm/pull/16864, "FA3 decode perf improvement - single mma warp group support for
head dim 128", the vLLM side of vllm-project/flash-attention PR #63; still under review on 2025-04-24, after the
0.8.4 release of 2025-04-14, so 0.8.5 is the first release that can carry it). A ``software.vllm`` release pin before
it plans the 128-row tile (``compute.decode_step.FA3_DECODE_TILE_ROWS_TWO_MMA_WG``); no pin, or one that names no
release, the 64-row one."""


def vllm_fa3_one_mma_wg(card: RunCard) -> bool:
    """False for a ``software.vllm`` release pin before ``VLLM_FA3_ONE_MMA_WG_SINCE`` (its FA3 decode runs 128-row
    tiles); True otherwise (``compute.decode_step.fa3_decode_query_rows``)."""
    release = sglang_release(card.software.vllm)
    return release is None or release >= VLLM_FA3_ONE_MMA_WG_SINCE


def sglang_scheduler_inputs(card: RunCard, gpu: GpuSpec) -> dict:
    """An SGLang engine's scheduler as ``generation_time`` reads it: the overlap scheduler (``overlap_schedule``:
    ``rollout.sglang_overlap_schedule``; unset, on from ``SGLANG_OVERLAP_DEFAULT_SINCE`` and off for a release pinned
    before it) and the largest CUDA-graph batch of the ``software.sglang`` release
    (``decode_step.sglang_cuda_graph_max_batch``; an unpinned card at ``SGLANG_NEWEST_RELEASE_READ``, a pin that
    names no release, a branch or a commit, none). {} for any other engine (vLLM's host work stays serial, its
    captured batches are not limited here). Eager kernels are priced per engine by ``generation_phase``
    (``decode_step.eager_s_per_kernel_of``)."""
    if card.rollout.engine is not RolloutEngine.SGLANG:
        return {}
    from trainfit.compute.decode_step import sglang_cuda_graph_max_batch

    ro = card.rollout
    pin = (card.software.model_extra or {}).get("sglang")
    release = sglang_release(pin) if pin else SGLANG_NEWEST_RELEASE_READ
    overlap = ro.sglang_overlap_schedule
    if overlap is None:
        overlap = release is None or release >= SGLANG_OVERLAP_DEFAULT_SINCE
    return {"overlap_schedule": bool(overlap),
            "cuda_graph_max_batch": sglang_cuda_graph_max_batch(
                release=release, gpu_memory_mib=gpu.memory_bytes / 2**20, tp=ro.tensor_parallel)}


def generation_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, rollout, r: DeviceRates) -> PhaseTime | None:
    """The rollout engine's time for the step's prompts (None when the engine cannot start)."""
    if card.rollout.engine is RolloutEngine.DEEPSPEED_HYBRID:
        return hybrid_generation_phase(card, spec, gpu, r)
    if rollout is None or not rollout.engine_fits:
        return None
    if card.rollout.engine is RolloutEngine.HF:
        return hf_generation_phase(card, spec, rollout, r)
    from trainfit.compute.decode_step import eager_s_per_kernel_of, fa3_decode_query_rows, tp_link
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.generation import generation_time

    ro = card.rollout
    calls = generation_calls(card)
    engine_per_node = rollout_nodes(card)[1]
    # a tensor-parallel engine inside one NVLink bridge group all-reduces on the bridge (compute.rates.group_rates)
    r = group_rates(r, ranks=ro.tensor_parallel)
    link = tp_link(rates=r, tp=ro.tensor_parallel, engine_gpus_per_node=engine_per_node,
                   nic_bytes_per_s=nic_bytes_per_s(card), gpu_id=gpu.id, framework=card.preset)
    g = generation_time(
        spec=spec, matmul_params=matmul_params(spec), rates=r, tp=ro.tensor_parallel,
        prompts=ceil(generated_prompts(card) / calls),
        samples_per_prompt=ro.num_generations, prompt_len=ro.prompt_len, prompt_len_mean=prompt_mean(card),
        response_len_max=ro.response_len, response_len_mean=response_mean(card, spec), response_len_shape=ro.response_len_shape,
        response_clip_ratio=published_lengths(card).get("clip_ratio"),
        response_len_longest=published_lengths(card).get("longest_tokens"),
        weight_bytes=bf16_engine_weight_bytes(spec), kv_bytes_per_token=rollout.kv_bytes_per_token * ro.tensor_parallel,
        max_num_seqs=ro.max_num_seqs, **_kv_pool(rollout),
        cuda_graphs=ro.cuda_graphs, engines=max(1, rollout.engine_instances),
        streaming=ro.async_mode is AsyncMode.FULLY_ASYNC, tp_link=link, engine_multiprocess=ro.engine_multiprocess,
        engine_generation=str(ro.vllm_engine) if ro.engine is RolloutEngine.VLLM else "v1",  # v0 is vLLM's alone
        cumulative_outputs=None if ro.engine_outputs is None else ro.engine_outputs is EngineOutputs.CUMULATIVE,
        eager_s_per_kernel=eager_s_per_kernel_of(
            r, ro.engine, spec=spec,
            engine_generation=str(ro.vllm_engine) if ro.engine is RolloutEngine.VLLM else "v1"),
        **sglang_scheduler_inputs(card, gpu), **quantized_engine_inputs(card, spec, r), **bnb_engine_inputs(card, spec),
        decode_attention_rows=(fa3_decode_query_rows(spec, compute_capability=r.compute_capability,
                                                     one_mma_wg=vllm_fa3_one_mma_wg(card))
                               if ro.engine is RolloutEngine.VLLM and str(ro.vllm_engine) == "v1" else 0),
        engine_lora=engine_serves_adapter(card),
        custom_all_reduce=engine_custom_all_reduce(card),
    )
    bound = {"bandwidth": "memory"}.get(g.bound, g.bound)
    # each call is its own engine batch, waiting for its longest completion: the calls add up (generation_calls)
    return rl_phase("generation", calls * g.total_s, bound, prefill=calls * g.prefill_s, decode=calls * g.decode_s,
                  long_tail=calls * g.tail_s, tp_all_reduce=calls * g.tp_comm_s,
                  preemption_recompute=calls * g.preemption_recompute_s)


def hf_gathers_per_forward(card: RunCard) -> bool:
    """True when ``generate`` on the sharded trainer all-gathers every decoder layer unit in every forward: torch FSDP
    that reshards a unit after its forward (strategy fsdp: FULL_SHARD / FSDP2's default ``reshard_after_forward``;
    hsdp: HYBRID_SHARD) over more than one rank, which TRL does not unshard for the call (FSDP1: the root unit alone,
    ``summon_full_params(recurse=False)``; FSDP2: nothing; trl 1.16.0 trl/trainer/grpo_trainer.py l.1861-1875,
    trl/distributed.py l.74-91). False for an unsharded model (single, ddp, zero1, zero2), for SHARD_GRAD_OP (kept
    unsharded after its first forward) and for ZeRO-3, whose whole model TRL gathers once per call with
    ``ds3_gather_for_generation`` (its default, trl/models/utils.py l.141-150; a run that turns it off, each module
    gathered in every forward by DeepSpeed's hooks, is not modelled apart): their once-a-call gather is the weight
    sync's (``plan.rl_sync.hf_shared_weights``)."""
    return card.parallel.strategy in (Strategy.FSDP, Strategy.HSDP) and group_sizes(card)[0] > 1


def hf_sharded_forward_terms(card: RunCard, spec: ModelSpec, r: DeviceRates) -> tuple[dict | None, float, float]:
    """What a sharded trainer adds to each forward of ``generate`` (``compute.static_generation``, "A sharded
    trainer's forwards"), as ``(layer_gathers, unit_host_s_per_forward, root_gather_s)``: the decoder layer units'
    all-gathers (``collectives.exposed_forward_gathers``' arguments but ``layer_forward_s``; None unless
    ``hf_gathers_per_forward``), the FSDP units' no-grad forward hooks (``training.fsdp_unit_host_seconds``, one per
    decoder layer and the root, ``training.fsdp_units``; 0 for an unsharded model or ZeRO-3, whose hooks TRL removes
    for the call) and the root unit's gather once per call (FSDP1's ``summon_full_params(recurse=False)``; FSDP2's root
    is not resharded after forward, so its first forward gathers it once: the same bytes). The gathered bytes are the
    trainer's stored ones (``plan.time.gathered_weight_bytes_of``: nf4 plus the adapters for QLoRA), over the shard
    group (HSDP: ``training.hsdp_links``), the root's share ``training.root_unit_share``. FSDP1 with PEFT's adapter
    units (``parallel.fsdp_adapter_units``): the rate limiter leaves the layers' gathers unhidden
    (``collectives.rate_limiter_exposes_layer_gathers``); the adapter units' own hooks are not counted here."""
    from trainfit.compute.training import (
        Parallel,
        data_ring_bus_bytes_per_s,
        fsdp_unit_host_seconds,
        fsdp_units,
        hsdp_links,
        root_unit_share,
    )
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.time import gathered_weight_bytes_of
    from trainfit.spec.enums import FSDP_STRATEGIES

    p = card.parallel
    ranks = group_sizes(card)[0]
    if p.strategy not in FSDP_STRATEGIES or ranks <= 1:
        return None, 0.0, 0.0
    hooks_s = fsdp_units(spec) * fsdp_unit_host_seconds(fsdp2=p.fsdp2, grad=False)[0]
    if not hf_gathers_per_forward(card):
        return None, hooks_s, 0.0
    per_node = card.hardware.gpus_per_node
    par = Parallel(strategy=p.strategy.value, ranks=ranks, gpus_per_node=per_node,
                   nic_bytes_per_s=nic_bytes_per_s(card), hsdp_shard=p.hsdp_shard_size or 0, fsdp2=p.fsdp2)
    if p.strategy is Strategy.HSDP:
        links = hsdp_links(par, r)
        group, bus, nodes = links.shard, links.shard_bus_bytes_per_s, links.shard_nodes
    else:
        group, bus = ranks, data_ring_bus_bytes_per_s(par, r, ranks=ranks)
        nodes = coll.group_nodes(ranks=ranks, ranks_per_node=max(1, per_node))
    w = gathered_weight_bytes_of(card, spec)
    gathered = w.base + w.adapter
    root = root_unit_share(spec)
    link = coll.IntraLink.of(nvlink=r.nvlink)
    gathers = dict(layers=spec.num_layers, layer_weight_bytes=gathered * (1.0 - root) / spec.num_layers,
                   layer_grad_bytes=0.0, root_weight_bytes=0.0, root_grad_bytes=0.0, ranks=group,
                   bus_bytes_per_s=bus, nodes=nodes, intra_link=link, micro_steps=1,
                   layer_gathers_hidden=not coll.rate_limiter_exposes_layer_gathers(
                       adapter_units=card.resolved_fsdp_adapter_units and trainable_spec(card).lora is not None,
                       fsdp2=p.fsdp2, reshard_after_forward=True, ranks=group))
    root_s = coll.all_gather_seconds(total_bytes=gathered * root, ranks=group, bus_bytes_per_s=bus, nodes=nodes,
                                     intra_link=link)
    return gathers, hooks_s, root_s


GEMM_4BIT_FUSED_MAX_ROWS = 512
"""Rows (tokens) up to which bitsandbytes' ``gemm_4bit`` keeps its fused kernel on the packed 4-bit weight of a large
linear under ``no_grad``; above, it dequantises the weight and calls ``F.linear`` (bitsandbytes 0.50.2 from PyPI, read
2026-12-05: bitsandbytes/backends/cuda/ops.py ``_gemm_4bit_use_custom_cuda`` l.677-679 "custom wins up to M=512";
the small-weight tiers above it, l.635-675, are not modelled apart)."""


def hf_peft_inputs(card: RunCard, spec: ModelSpec, *, prefill_rows: int, decode_rows: int = 2) -> dict[str, float]:
    """What the trained PEFT model changes in ``generate`` (``compute.static_generation``, "A PEFT policy"):
    ``adapter_kernels_per_forward`` (``peft_lora_forward_kernels`` over the adapted linears, ``memory.lora.
    targeted_groups``; the adapters of routed experts' 3-D stacks are not counted, a lower bound as
    ``decode_step.engine_lora_kernels``), and for a QLoRA base through bitsandbytes ``weight_bytes`` (the stored model,
    ``plan.time.gathered_weight_bytes_of``: nf4 plus the adapters, what each decode step's fused 4-bit GEMMs stream)
    and ``prefill_extra_bytes`` (``inventory.NF4_DEQUANT_BYTES_PER_WEIGHT`` over ``memory.weights.
    quantized_linear_params`` where the prefill's ``prefill_rows`` exceed ``GEMM_4BIT_FUSED_MAX_ROWS``). With a
    ``software.bitsandbytes`` pin before 0.50 (``bnb_dequantises_per_call``) the same ``matmul_4bit`` dequantises
    every 4-bit weight for any call of two or more rows (bitsandbytes @7aec4a88465440b6466a526fe9bbb30930a04ba4, the
    0.45.2 tag, autograd/_functions.py l.462, l.512-533; ``compute.bnb_decode``): the prefill's dequantisation for
    ``prefill_rows`` above one, and ``decode_weight_bytes`` a decode step of ``decode_rows`` (the static batch's
    sequences) streams, ``bnb_4bit_step_weight_bytes`` with the adapters as 16-bit bytes beside the unquantized rest.
    Unpinned: ``BNB_UNPINNED_ASSUMPTION``. Empty for a full fine-tune; a 4-bit base through GPTQ or torchao is left at
    the bf16 stream (not read for ``generate``)."""
    from trainfit.compute.inventory import NF4_DEQUANT_BYTES_PER_WEIGHT
    from trainfit.compute.static_generation import peft_lora_forward_kernels
    from trainfit.memory.lora import targeted_groups
    from trainfit.memory.weights import count_scale, quantized_linear_params
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.time import gathered_weight_bytes_of
    from trainfit.spec.enums import QloraDequant, Scope

    lora = trainable_spec(card).lora
    if lora is None:
        return {}
    adapted = sum(g.count for g in targeted_groups(spec, lora) if g.experts <= 1)
    out = {"adapter_kernels_per_forward": peft_lora_forward_kernels(
        adapted_linears=adapted, adapter_dtype_bytes=lora.adapter_dtype_bytes, dropout=lora.dropout > 0)}
    if card.scope is Scope.QLORA and card.lora.dequant is QloraDequant.BITSANDBYTES:
        w = gathered_weight_bytes_of(card, spec)
        out["weight_bytes"] = w.base + w.adapter
        dequantises = bnb_dequantises_per_call(card)
        if prefill_rows > (1 if dequantises else GEMM_4BIT_FUSED_MAX_ROWS):
            out["prefill_extra_bytes"] = (NF4_DEQUANT_BYTES_PER_WEIGHT * quantized_linear_params(spec)
                                          * count_scale(spec))
        if dequantises:
            from trainfit.compute.bnb_decode import bnb_4bit_step_weight_bytes

            quantized, kept_bytes = _bnb_split_bytes(spec)
            out["decode_weight_bytes"] = bnb_4bit_step_weight_bytes(
                quantized_weights=quantized, unquantized_bytes=kept_bytes + w.adapter, rows=max(1, decode_rows))
    return out


def hf_generation_phase(card: RunCard, spec: ModelSpec, rollout, r: DeviceRates) -> PhaseTime:
    """``rollout.engine: hf``: every training rank runs transformers' ``generate`` on its own share of the step's
    sequences, a static eager batch that decodes to the longest response of the step (``compute.static_generation``),
    ``rollout.generation_calls`` calls in turn. TRL's GRPOTrainer without vLLM generates on each process's local
    prompts with ``unwrapped_model.generate(...)`` inside ``unwrap_model_for_generation`` and
    ``summon_full_params(self.model_wrapped, recurse=False)`` (trl 1.16.0 from PyPI, read 2026-12-05:
    trl/trainer/grpo_trainer.py ``_generate_single_turn`` l.1861-1875), no engine, no CUDA graphs. A sharded trainer's
    forwards gather and hook as ``hf_sharded_forward_terms`` says: under FULL_SHARD / HYBRID_SHARD every prefill and
    decode forward pays the decoder layers' all-gathers its compute does not hide (``layer_gathers``) and the root
    unit is gathered once per call (``root_gather``); the FSDP units' hooks run in every forward (``fsdp_hooks``). A
    PEFT policy generates through its adapters and, for QLoRA, its 4-bit base (``hf_peft_inputs``: ``adapter_kernels``,
    ``nf4_dequant``)."""
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.response_lengths import slowest_engine_length_groups
    from trainfit.compute.static_generation import static_batch_generation_time
    from trainfit.methods.roles import group_sizes

    ro = card.rollout
    calls = generation_calls(card)
    ranks = max(1, group_sizes(card)[0])
    sequences = generated_prompts(card) * ro.num_generations
    batch = max(1, ceil(sequences / ranks / calls))
    lengths = published_lengths(card)
    longest = slowest_engine_length_groups(
        shape=ro.response_len_shape, response_len_max=ro.response_len, response_len_mean=response_mean(card, spec),
        sequences=batch, engines=ranks * calls, clip_ratio=lengths.get("clip_ratio"),
        longest_tokens=lengths.get("longest_tokens"))[-1][0]
    gathers, hooks_s, root_s = hf_sharded_forward_terms(card, spec, r)
    peft = {"weight_bytes": bf16_engine_weight_bytes(spec)} | hf_peft_inputs(card, spec,
                                                                            prefill_rows=batch * ro.prompt_len,
                                                                            decode_rows=batch)
    g = static_batch_generation_time(
        spec=spec, matmul_params=matmul_params(spec), rates=r, calls=calls, batch_sequences=batch,
        prompt_len_padded=ro.prompt_len, response_len_longest=longest,
        kv_bytes_per_token=rollout.kv_bytes_per_token * ro.tensor_parallel, layer_gathers=gathers,
        unit_host_s_per_forward=hooks_s, **peft)
    bound = {"bandwidth": "memory"}.get(g.bound, g.bound)
    root_gather_s = calls * root_s
    # layer_gathers / fsdp_hooks: what of prefill and decode the sharded units' gathers and hooks take
    return rl_phase("generation", g.total_s + root_gather_s, bound, prefill=g.prefill_s, decode=g.decode_s,
                    root_gather=root_gather_s, long_tail=0.0, tp_all_reduce=0.0, preemption_recompute=0.0,
                    layer_gathers=g.gathers_s, fsdp_hooks=g.hooks_s, adapter_kernels=g.adapter_s,
                    nf4_dequant=g.dequant_s)


VERL_CUSTOM_ALL_REDUCE_SINCE = (0, 8)
"""The first verl minor release that can build its vLLM engine with vLLM's custom all-reduce on: verl's main dropped
``"disable_custom_all_reduce": True`` from the async server's engine arguments on 2026-01-27 (volcengine/verl
6a671a377a440ffdf0fc6bb8aa965dc37f3311f1, #5052), after v0.7.0 (f9c855f7cf04d603c9546bc01776c74806a879c1,
2026-01-05, ``verl/workers/rollout/vllm_rollout/vllm_async_server.py`` l.306 still passes it). No 0.7.x patch
release was read, so 0.8 is taken as the first to carry the change."""


def engine_custom_all_reduce(card: RunCard) -> bool:
    """Whether the rollout engine runs vLLM's custom all-reduce where vLLM would (``compute.decode_step.tp_all_reduce``;
    its module docstring, "Custom all-reduce off"): False for verl with vLLM, whose every vLLM rollout up to v0.7.0
    builds the engine with ``disable_custom_all_reduce=True`` (the SPMD ``external_launcher`` rollout, v0.2.0.post2
    ``verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py`` l.100 @fb532783ad3176b4f2a1acbe4f75a5d695b4e0b4 to
    v0.6.1 l.239 @d62da4950573d7a4b7ef2362337952e7ab59e78d; the async server from v0.4.1 l.174
    @8d9e350ea58c7ad4b50dd14d9dcb50577242c55f to v0.7.0 l.306) or, on its patched vLLM 0.5.4 / 0.6.3, a
    tensor-parallel group with ``use_custom_allreduce=False`` (v0.3.0.post1
    ``verl/third_party/vllm/vllm_v_0_6_3/parallel_state.py`` l.144), where ``software.verl`` pins a release before
    ``VERL_CUSTOM_ALL_REDUCE_SINCE`` (``spec.card.pin_before``: ``0.7.0``, ``<0.8``). No pin, a later release, a
    lower bound, or a pin that names no release (a branch such as ``main``, which dropped the flag on 2026-01-27, or a
    commit): the newest behaviour, vLLM's custom all-reduce (True), as the other verl version gates read an unpinned
    card (``plan.rl_offload``). True for every other framework and engine (vLLM's default; SGLang's custom
    all-reduce is not modelled apart)."""
    if card.preset != "verl" or card.rollout.engine is not RolloutEngine.VLLM:
        return True
    from trainfit.spec.card import pin_before

    return not pin_before((card.software.model_extra or {}).get("verl"), VERL_CUSTOM_ALL_REDUCE_SINCE)


def engine_serves_adapter(card: RunCard) -> bool:
    """True when the rollout engine generates through the policy's LoRA adapter unmerged, so every decode step also runs
    the punica kernels of its LoRA-wrapped linears (``compute.decode_step.engine_lora_kernels``): verl with a LoRA
    actor and vLLM starts the engine with ``enable_lora`` (``max_loras`` 1, ``max_lora_rank`` the actor's rank) when
    ``lora_rank`` > 0 (verl-project/verl verl/workers/fsdp_workers.py l.417 @7dc3ee7476c9af1042636f44bca9e412d1de1a6d)
    and, after the first sync of the base weights, hands it only the adapter, generating with a ``TensorLoRARequest``
    (verl/workers/sharding_manager/fsdp_vllm.py ``update_params`` l.253-265, same commit). The weight sync is then
    planned adapter-only (time: ``plan.rl_sync`` ``_adapter_sync_phase``; the trainer's peak:
    ``methods.rl.adapter_sync_spike``, one decoder layer under ``rollout.layered_summon``) and the engine holds its
    adapter slots beside its weights (``methods.rl.engine_adapter_slot_bytes``). False for the other
    frameworks (their engine is planned on the plain model, as it is when the adapter is merged into the weights
    sent) and for engines other than vLLM. Unsloth (``preset: unsloth``) likewise: its vLLM engine is started with
    ``enable_lora=True`` and every ``generate`` gets ``lora_request=self.model.load_lora(..., load_tensors=True)``
    built from the trainer's adapter tensors (``methods.unsloth``, 1. and 3.: unslothai/unsloth unsloth/models/rl.py
    l.362-368 @027b5100c7492bce025fe2f03681f440843e4666; unsloth-zoo vllm_utils.py load_lora l.1053-1075
    @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de).

    Checked on verl's GRPO-LoRA baseline logs (eric-haibin-lin/verl-data gsm8k/*lorarank32*.log
    @cc499463f18599e4a604e893f20872db68435928; Qwen2.5-3B to 72B, ``enforce_eager`` True, vLLM V0): with the adapter's
    kernels the 8 rows' generation moves from a signed median of -36.8 % to +13.9 % (median |error| 36.8 % -> 25.6 %),
    the step from -35.1 % to +4.7 %. What is left is split by dataset, not by the engine: the 8-GPU GSM8K rows
    (response cap 1024, published clip ratio 0.0) now plan 20-40 % over (the 2-GPU 3B row +8 %), because the slowest engine's longest response is taken at
    the cap (``compute.response_lengths``) where none of the step's responses reached it; the GSM8K+MATH rows (cap
    512, clip ratio 0.04) plan 14B / 32B about 31 % under. The scripts' ``VLLM_ATTENTION_BACKEND=XFORMERS`` does not
    change the decode: V0's xFormers backend runs xFormers only for prefill and decodes through vLLM's
    ``PagedAttention.forward_decode`` (vllm-project/vllm vllm/attention/backends/xformers.py
    @000f89056e22d95b8ee7f03350bf95343d73694f), the same per-step kernels ``decode_step`` counts. Not explained here:
    the log-prob passes (-33 %) and the actor update (-34 %, signed medians) of the same rows. verl's published
    ``perf/mfu/actor`` (its qwen2 FLOP count over the update's own time at 989 TFLOPS a GPU, verl/utils/
    flops_counter.py) implies update_policy times of 6.7 / 11.8 / 16.0 / 24.6 s for 7B / 14B / 32B / 72B on GSM8K,
    83-94 % of the published update timers (all 8 rows), so the timers hold little beyond the update itself; the 32B and 72B
    updates plan within 15 %, the launch-bound 3B / 7B / 14B ones about 35 % under, which points at the host (not
    published) rather than at a LoRA kernel the plan leaves out (PEFT's modules are already priced in both passes)."""
    from trainfit.plan.resolve import trainable_spec

    return (card.preset in ("verl", "unsloth") and card.rollout.engine is RolloutEngine.VLLM
            and trainable_spec(card).lora is not None)


def adapter_collect_gathers(card: RunCard) -> tuple[bool, bool]:
    """How verl's trainer ranks gather the adapter they hand an engine that serves it (``engine_serves_adapter``), as
    ``(summons_base_units, adapter_sharded)`` (``memory.engine_lora.adapter_summon_peak_bytes``, the memory and the
    time alike): a sharded actor outside FSDP2 (FSDP1, and ZeRO-3 planned as it) unshards whole units, base weights
    included; under FSDP2 (``parallel.fsdp_version``, the default) only the adapter's DTensors are gathered
    (``param.full_tensor()``); an unsharded actor (single, ddp, zero1, zero2) gathers nothing."""
    sharded = card.parallel.strategy.value in ("zero3", "fsdp", "hsdp", "fsdp_grad_op")
    return sharded and not card.parallel.fsdp2, sharded


def generation_calls(card: RunCard) -> int:
    """Sequential generate calls per step (``rollout.generation_calls``), each on ``ceil(generated_prompts /
    calls)`` prompts and timed as a batch of its own that ends with its longest completion: TRL before 0.17 calls
    ``llm.generate`` once per gradient-accumulation micro-batch, on the prompts the processes gather for that
    micro-batch (huggingface/trl trl/trainer/grpo_trainer.py ``compute_loss`` l.370-400
    @29de6eec7ba9b3923e41012e4984e9e352c9ea54, v0.14.0; ``_prepare_inputs`` l.447-490
    @09eefa73abbba26c73851f1094f325aa1671f3fa; once per effective batch from TRL #3283,
    294f35bf3c0043d3ee6b9b5d22385e5736f6ce9e, v0.17.0). The calls are equal (the card refuses a count that does not
    divide the generated prompts). With vLLM the weights reach the engine once per step (the same commits:
    ``_last_loaded_step``), so only the generation repeats; with engine hf the trainer gathers its weights for every
    call (``plan.rl_sync.hf_gather_per_call``). The DeepSpeed Hybrid Engine keeps its own static batches
    (``hybrid_generation_phase``; the card refuses more than one call with it)."""
    return max(1, min(card.rollout.generation_calls, generated_prompts(card)))


def hybrid_generation_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, r: DeviceRates) -> PhaseTime:
    """DeepSpeed-Chat's generation through DeepSpeed's Hybrid Engine (``compute.hybrid_engine``): every training GPU
    generates its share of the step's generated prompts (``generated_prompts``) in static batches of ``max_num_seqs / tensor_parallel`` prompts per GPU
    (``per_device_generation_batch_size``), the actor's ZeRO-3 partitions gathered before every call."""
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.hybrid_engine import hybrid_engine_generation_time
    from trainfit.rollout.vllm import kv_bytes_per_token

    ro = card.rollout
    train_gpus, _ = group_sizes(card)
    tp = ro.tensor_parallel
    weights = bf16_engine_weight_bytes(spec)
    # the embeddings every rank keeps whole (the hybrid engine's non-tensor-parallel parameters; the tied head
    # reads the token embedding each step) and the learned positions where the model has them
    embed = spec.vocab_size * spec.hidden_size * (1 if spec.tie_word_embeddings else 2)
    replicated = min(weights, 2.0 * (embed + spec.learned_positions * spec.hidden_size))
    multi_node = card.hardware.nodes > 1
    per_node = card.hardware.gpus_per_node
    # the gather's ranks on one node (every training GPU a node has) and a cross-node TP group's share the node's NICs
    # where it has fewer than its GPUs (hardware.nic_gbps_per_node, collectives.gpu_nic_bytes_per_s), as the rings do
    gather_nic = coll.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=nic_bytes_per_s(card),
                                          local_ranks=min(train_gpus, per_node))
    bus = min(r.intra_node_bus_bytes_per_s, gather_nic) if multi_node else r.intra_node_bus_bytes_per_s
    tp_bus = group_rates(r, ranks=tp).intra_node_bus_bytes_per_s if tp <= per_node else coll.gpu_nic_bytes_per_s(
        rates=r, nic_bytes_per_s=nic_bytes_per_s(card), local_ranks=per_node)
    g = hybrid_engine_generation_time(
        rates=r, sequences_per_gpu=ceil(generated_prompts(card) * ro.num_generations / train_gpus),
        generation_batch_per_gpu=max(1, ro.max_num_seqs // tp), prompt_len_tokens=ro.prompt_len,
        response_len_tokens=ro.response_len, num_layers=spec.num_layers, hidden_size=spec.hidden_size,
        matmul_params=matmul_params(spec), layer_weight_bytes=weights - replicated, replicated_weight_bytes=replicated,
        kv_bytes_per_token=kv_bytes_per_token(spec, tp=1, dtype_bytes=2), inference_tp=tp,
        zero3_ranks=train_gpus if card.parallel.strategy is Strategy.ZERO3 else 1, gather_bus_bytes_per_s=bus,
        tp_bus_bytes_per_s=tp_bus, tp_nodes=max(1, ceil(tp / card.hardware.gpus_per_node)),
        zero3_nodes=max(1, ceil(train_gpus / card.hardware.gpus_per_node)),
    )
    bound = {"bandwidth": "memory", "host": "launch"}.get(g.bound, g.bound)
    return rl_phase("generation", g.total_s, bound, zero3_gather=g.gather_s, prefill=g.prefill_s, decode=g.decode_s)


def reward_phase(card: RunCard) -> PhaseTime | None:
    """The reward of every generated completion (``generated_prompts`` x ``num_generations``):
    ``rollout.reward_seconds_per_sample`` each over ``rollout.reward_workers`` in parallel (sandboxed tests); None
    without a per-sample time (a reward model's forward is a pass on the training GPUs, ``rl_passes``)."""
    ro = card.rollout
    if not ro.reward_seconds_per_sample:
        return None
    s = generated_prompts(card) * ro.num_generations * ro.reward_seconds_per_sample / ro.reward_workers
    return rl_phase("reward", s, "host", per_sample=ro.reward_seconds_per_sample)
