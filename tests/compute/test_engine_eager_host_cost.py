"""What an inference engine's eager decode kernel costs the host, from sources outside the scored rows, against
the figure ``decode_step`` charges (``rates.HOST_S_PER_FORWARD_KERNEL``, 65 us, fitted on transformers *training*
forwards); and what ``decode_kernels`` leaves out of vLLM's Qwen3 layer.

**vLLM and SGLang eager vs CUDA graphs on an H200.** deepspeedai/DeepSpeed pull request #8352 (comment "Controlled
Rollout Performance Attribution on NVIDIA H200", 2026-09-22): GPT-2 in bf16, one H200 per backend, batch 1, 128
prompt + 32 greedy tokens, mean request latency over 5 runs after 2 warm-ups: "verl / vLLM" 154.1 ms eager, 41.8 ms
with the "vLLM non-eager path"; "slime / SGLang" 156.0 ms eager, 33.2 ms with "SGLang CUDA Graph". A request is
33 forwards, of which the graphs replace the 32 decode steps (SGLang captures decode batches only; the prefill
stays eager in both columns: ``rates.EAGER_DECODE_FORWARDS_PER_REQUEST``). Graphed, the step is
the engine's host work around one graph launch (GPT-2's 250 MB of weights read in ~0.05 ms), eager the same host work
plus the issue of every kernel, which runs ahead of the device: the difference per forward over the kernels is the
host's cost per eager kernel. vLLM's GPT-2 layer (vllm-project/vllm ``vllm/model_executor/models/gpt2.py``
@017689429418547490506c3bf52419a806c115d7, ``GPT2Block.forward``) launches 11: ``ln_1``, ``c_attn`` (GEMM with its
bias), the KV-cache write and the attention kernel, ``c_proj``, the residual add, ``ln_2``, ``c_fc``, the GELU,
``c_proj``, the residual add; 12 layers, plus ~8 outside them (``wte``, ``wpe``, their add, ``ln_f``, the logits
row gather and ``lm_head``, greedy sampling): ~140. vLLM: (154.1 - 41.8) / 32 / 140 = **25.1 us**; SGLang (its
GPT-2 layer, sgl-project/sglang ``python/sglang/srt/models/gpt2.py`` @00b08c497f0735678e084ae5e3dd88ca06b46627, is
the same modules): (156.0 - 33.2) / 32 / 140 = **27.4 us** (``rates.GPT2_DECODE_FORWARD_KERNELS``,
``rates.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED``, ``rates.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED``).

With gpt-fast's eager A100 step (21.6 us, ``test_eager_decode_evidence``) and the per-step slope of
dingxianzhong/play-verl's Qwen2-7B log (~26 us, vLLM 0.8.3 V1 ``enforce_eager``, H100), four sources put an
inference-mode eager kernel at 22-27 us of host time on NVIDIA hosts, 2.4-3x below the 65 us ``decode_step`` charges.

**Why the plan keeps 65 us** (benchmarks/step_times.py on the tree of 24ae4ae, 2026-12-02, with only the eager
decode launch re-priced, CUDA-graph rows unchanged): at 22 us the generation-phase subset's median |error| goes from
15 % to 35 % and the RL-step median from 14 % to 15 %: the play-verl Qwen2-7B phases +64 % / +74 % -> -23 % / +19 %
and verl PR #5596's SGLang GB200 phase +270 % -> +130 %, but the play-verl Qwen2.5-0.5B phases -15 % / 0 % -> -55 %
/ -30 %, the MI300X deepseek-llm-7b phases +3 % / -14 % -> -35 % / -50 %, DeepSeek-V3 on H20 -11 % -> -63 % and
SkyRL's eager Qwen3.5-9B baseline -13 % -> -66 %. What the over-priced launch offsets there is named in
``decode_step``'s docstring (verl's per-phase cost outside the decode, the ROCm hosts' larger per-token cost,
DeepSeek-V3's uncounted routing kernels); until those are modelled the price stays, and the tests below are strict
xfails. (Since then the measured price applies within its scope, vLLM V1 and SGLang on dense softmax-attention models,
with the slowest engine planned: ``decode_step``'s "The measured eager price, within its scope"; the 0.5B and
MI300X rows are V0 and DeepSeek-V3 / Qwen3.5-9B outside the scope, so they keep 65 us.)
Re-checked on 4d89d40 (``decode_step``'s docstring, "verl's ``gen`` timer, operation by operation"):
published verl timers put everything in ``gen`` outside vLLM's generate under 0.9 s on one GPU, so the ~2.5 s per
call the play-verl rows would need is not verl's sharding manager. Even 2.5 s added to every colocated synchronous
verl call leaves the held-out RL rows at 21.3 % against 16.3 % with 24 us; most rows the lower price breaks are
other engines' or asynchronous ones.

**verl PR #5596's row also runs at the card's 256 sequences**: verl passes ``rollout.max_num_seqs`` (default 1024,
``verl/trainer/config/rollout/rollout.yaml`` line 76 @3f2fd075da015579639cd2f99aa1c2811c6f48d4) to SGLang as
``max_running_requests`` (``verl/workers/rollout/sglang_rollout/async_sglang_server.py`` line 192, same commit), and
the entry leaves it unset; at 1024 the plan's phase is 561 s at 65 us, 457 s at 22 us (published 265 s). The engine
core's 80 us per running sequence (fitted on vLLM rows) is then 82 ms of a step whose kernels issue in ~10 ms.
"""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.rates import (
    EAGER_DECODE_FORWARDS_PER_REQUEST,
    GPT2_DECODE_FORWARD_KERNELS,
    HOST_S_PER_FORWARD_KERNEL,
    SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED,
    VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED,
    default_rates,
)

FORWARDS_PER_REQUEST = EAGER_DECODE_FORWARDS_PER_REQUEST
"""The 32 decode steps of one DeepSpeed PR #8352 request that the graphs replace."""
GPT2_KERNELS = GPT2_DECODE_FORWARD_KERNELS
"""~140 kernels per GPT-2 decode forward, vLLM's and SGLang's (module docstring)."""
PUBLISHED_MS = {"vllm": (154.1, 41.8), "sglang": (156.0, 33.2)}
"""(eager, graphed) mean request latency, ms, H200, DeepSpeed PR #8352."""
GPT_FAST_S_PER_KERNEL = 21.6e-6
PLAY_VERL_S_PER_KERNEL = 26e-6
H100 = default_rates(resolve_gpu("h100-sxm"))


def _per_kernel_s(engine: str) -> float:
    eager_ms, graph_ms = PUBLISHED_MS[engine]
    return (eager_ms - graph_ms) * 1e-3 / FORWARDS_PER_REQUEST / GPT2_KERNELS


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_h200_engine_eager_kernel_costs_the_host_about_25_us(engine):
    assert 20e-6 < _per_kernel_s(engine) < 30e-6


def test_the_rates_constants_are_this_arithmetic():
    assert VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED == pytest.approx(_per_kernel_s("vllm"))
    assert SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED == pytest.approx(_per_kernel_s("sglang"))


def test_the_four_sources_agree_within_a_third():
    figures = [_per_kernel_s("vllm"), _per_kernel_s("sglang"), GPT_FAST_S_PER_KERNEL, PLAY_VERL_S_PER_KERNEL]
    assert max(figures) / min(figures) < 1.35
    assert HOST_S_PER_FORWARD_KERNEL / max(figures) > 2.3


def test_the_eager_decode_launch_is_priced_at_the_engines_published_cost():
    """Was a strict xfail while every eager kernel was priced at 65 us; a dense model on vLLM V1 now reads the
    measured price (``decode_step`` module docstring, "The measured eager price, within its scope")."""
    spec = from_catalog("Qwen/Qwen2-7B-Instruct")
    kernels = ds.decode_kernels(spec, tp=1)
    launch = ds.eager_s_per_kernel_of(H100, "vllm", spec=spec) * kernels  # what _step_model charges an eager step
    assert launch == pytest.approx(kernels * _per_kernel_s("vllm"), rel=0.3)


@pytest.mark.xfail(strict=True, reason="decode_kernels counts 10 kernels per Qwen3 layer; vLLM's Qwen3Attention "
                                       "adds q_norm and k_norm (two RMSNorm kernels), not counted while the launch "
                                       "price is the training figure (module docstring)")
def test_qwen3_layers_launch_their_q_and_k_norms():
    """vllm-project/vllm ``vllm/model_executor/models/qwen3.py`` @002456df36fc7a63ca4463f335a49d05634ab2ab,
    ``Qwen3Attention.forward``: ``self.q_norm(q_by_head)`` and ``self.k_norm(k_by_head)`` between the QKV GEMM and
    the rotary embedding, each an ``RMSNorm`` (one kernel). Qwen3-8B at TP 4: 36 x (10 + 2 + 2)."""
    spec = from_catalog("Qwen/Qwen3-8B")
    assert spec.qk_norm
    assert ds.decode_kernels(spec, tp=4) == 36 * (10 + 2 + 2)
