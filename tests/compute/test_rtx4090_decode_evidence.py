"""The rollout engine on an RTX 4090 (Ada, sm_89) against published vLLM measurements, and the one scored RL run on
RTX 4090s that the plan misses.

**What vLLM runs on Ada.** Without an explicit backend, vLLM's CUDA platform tries ``FLASH_ATTN`` first on every
non-Blackwell card (``_get_backend_priorities``: FLASHINFER first only for ``device_capability.major == 10``;
vllm-project/vllm ``vllm/platforms/cuda.py`` @002db4951e0c4b326a559eb44b05698afd3e534a), i.e. FlashAttention 2 on
sm_89 (FA3 is Hopper-only). verl serves through that engine with CUDA graphs (``cudagraph_mode`` FULL_AND_PIECEWISE,
``enforce_eager: False``, the ``mp`` executor; verl-project/verl ``verl/workers/rollout/vllm_rollout/
vllm_async_server.py`` l.270-311 and ``verl/trainer/config/rollout/rollout.yaml`` @bf48903d93e4618531d3bbae96551a889007dd8b,
which requires ``vllm>=0.18.0``, ``setup.py``). ``compute.decode_step`` has no Ada-specific term: weights and KV
read at ``hbm_bytes_per_s`` (90 % of 1,008 GB/s), the GEMMs at 80 % of the 165.2 TFLOP/s bf16 dense peak (bf16
tensor cores accumulate in fp32; the 330 TFLOP/s figure is fp16 with fp16 accumulate, or sparsity).

**The step holds on stock RTX 4090s** (the first three tests):

* batch 1: tenstorrent/tt-inference-server issue #394 (comment of 2025-11-12, "Performance Benchmark Sweeps for
  Qwen_Qwen3-4B on 4090", vLLM, concurrency 1): TPOT 10.3-10.9 ms for input 128-4096 tokens; the plan 10.0-10.6 ms;
* many sequences, KV-bound with preemption for the 7B: Database Mart's "RTX4090 vLLM Benchmark" offline run
  (https://www.databasemart.com/blog/vllm-gpu-benchmark-rtx4090, read 2026-12-02: 300 requests of 100 input and
  600 output tokens sent at once, vLLM defaults): Qwen2.5-3B-Instruct 10.31 requests/s, DeepSeek-R1-Distill-Qwen-1.5B
  13.85, DeepSeek-R1-Distill-Qwen-7B 5.96, i.e. 29.1, 21.7 and 50.3 s; planned here at vLLM's defaults on 24 GB
  (0.9 of the card, 256 sequences, fixed 600-token responses): 28.1, 23.2 and 50.1 s (the 7B's 109k-token KV pool
  preempts ~100 sequences);
* tensor parallel 2 over PCIe without peer access: Database Mart's "vLLM Distributed Inference Optimization"
  (https://www.databasemart.com/blog/vllm-distributed-inference-optimization-guide, read 2026-12-03; its table's
  "Tensor Parallel Size" row reads 1, 1, 2 under "GPU Server" RTX4090*1, RTX4090*2, RTX4090*2): the same 300
  requests of 100 input tokens with DeepSeek-R1-Distill-Qwen-7B ran 35.08 s on two RTX 4090 at
  ``--tensor-parallel-size 2`` (162,191 tokens generated, 541 a request) and 48.35 s on one card; planned with
  541-token responses: 37.3 s at TP 2 (NCCL, no custom all-reduce without peer access, at the 8 GB/s no-P2P bus: 10.9 s
  of all-reduce; a 475k-token KV pool, no preemption) and 44.3 s at TP 1. The page's two-card run at TP 1 (106.97 s)
  is not planned: it does not say what the second card did.

**The scored run it misses** (fourth test, strict xfail): verl-project/verl issue #7412 (2026-08-14, four RTX 4090
48 GB, Qwen3-4B-Instruct-2507, GRPO, 256 prompts x 5, prompt <= 1024, response <= 3072, colocated vLLM; one step,
34, of its train log). The log gives more than the benchmark entry uses:

* the prompts are ~167 tokens, not the 1,024 maximum the plan assumes: ``global_seqlen/mean:458966.5`` over the 4
  ranks is 1,835,866 tokens, less 1,280 x ``response_length/mean:1267.02`` = 1,621,791 response tokens leaves
  214,075, 167 per sequence (the slowest request's ``prompt_length:150``; the per-token timers give 165-178);
* ``timing_s/agent_loop/generate_sequences/min:18.75``, ``/mean:266.64``, ``/max:539.54`` (the slowest: response
  3,072, prompt 150, ``num_preempted:-1``, i.e. not reported by that vLLM), against ``timing_s/gen:541.19``: the
  phase is the longest request, so nothing of weight outside generation sits in ``gen`` (the engine's sleep
  after it, ``ray_trainer.py`` l.1485-1489, and its wake in ``update_weights`` are seconds);
* ``response_length/max:3072`` and the issue's title: ~20 % of responses cut at the maximum.

At the logged prompt length the plan's generation is 188 s against 541 s (-65 %; 256 s, -53 %, at the assumed
1,024), and the step's other phases read short too (old/ref log-prob 54 s vs 72 s, actor update 211 s vs 472 s).
Not what closes it (each planned, prompt 167): the clipped tail (20 % of responses at 3,072 with the same mean:
199 s), a KV pool down to 15k tokens (329 s), verl's default rollout TP 2 (``rollout.yaml``
``tensor_model_parallel_size: 2``; NCCL over PCIe without peer access: 224 s; the TP 2 engine holds on stock cards,
third test), eager decode (+6 s); async
scheduling (on by default from vLLM 0.14 for the ``mp`` executor) would make the plan faster still. The first
request came back after 18.7 s (the shortest response is 38 tokens). At the plan's step costs an engine's 320
prompts are prefilled in ~7 chunks of 8,192 tokens (0.5 s each) and a step of 256 short sequences takes 39 ms, so
a short response admitted first is back within ~5 s: the engine's steps on that host ran ~3-4x the stock card's
from the start, before the KV pool fills, which is neither preemption nor the long tail. What slows them (the modified 48 GB boards, the host, the
unpublished engine settings) the issue does not say; no constant is fitted to it.
"""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.decode_step import decode_step_seconds
from trainfit.compute.flops import matmul_params
from trainfit.compute.generation import generation_time
from trainfit.compute.rates import default_rates
from trainfit.rollout.vllm import EngineConfig, engine_memory, kv_bytes_per_token

TT_QWEN3_4B_TPOT_S = {128: 10.5e-3, 1024: 10.3e-3, 2048: 10.8e-3, 4096: 10.9e-3}
"""tenstorrent/tt-inference-server issue #394: Qwen3-4B on an RTX 4090, vLLM, concurrency 1, TPOT by input length
(output 128 tokens)."""
DBM_REQUESTS_PER_S = {
    "Qwen/Qwen2.5-3B": 10.31,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": 13.85,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": 5.96,
}
"""Database Mart RTX 4090 offline vLLM run: 300 requests, 100 input + 600 output tokens (Qwen2.5-3B-Instruct shares
Qwen2.5-3B's shapes)."""


def _engine(model: str, gpu_id: str, *, utilization: float, max_model_len: int):
    spec, gpu = from_catalog(model), resolve_gpu(gpu_id)
    mem = engine_memory(spec, gpu_memory_bytes=gpu.memory_bytes,
                        engine=EngineConfig(max_model_len=max_model_len, gpu_memory_utilization=utilization))
    common = dict(spec=spec, matmul_params=matmul_params(spec), rates=default_rates(gpu), tp=1,
                  weight_bytes=mem.weights, kv_bytes_per_token=kv_bytes_per_token(spec, tp=1, dtype_bytes=2))
    return common, mem.num_blocks * mem.block_size


@pytest.mark.parametrize("prompt", sorted(TT_QWEN3_4B_TPOT_S))
def test_the_one_sequence_step_matches_a_published_rtx4090_tpot(prompt):
    common, _ = _engine("Qwen/Qwen3-4B", "rtx4090", utilization=0.9, max_model_len=8192)
    step = decode_step_seconds(batch=1, context_tokens=prompt + 64, **common).total_s
    assert step == pytest.approx(TT_QWEN3_4B_TPOT_S[prompt], rel=0.10)


@pytest.mark.parametrize("model", sorted(DBM_REQUESTS_PER_S))
def test_an_offline_rtx4090_batch_matches_the_published_run(model):
    common, kv = _engine(model, "rtx4090", utilization=0.9, max_model_len=700)
    g = generation_time(prompts=300, samples_per_prompt=1, prompt_len=100, response_len_max=600,
                        response_len_mean=600, response_len_shape="fixed", max_num_seqs=256, kv_capacity_tokens=kv,
                        prefix_sharing=False, **common)
    assert g.total_s == pytest.approx(300 / DBM_REQUESTS_PER_S[model], rel=0.10)


DBM_TP2_SECONDS = 35.08
"""Database Mart "vLLM Distributed Inference Optimization": DeepSeek-R1-Distill-Qwen-7B, 300 requests of 100 input
tokens, 162,191 tokens generated, two RTX 4090 at ``--tensor-parallel-size 2`` (module docstring)."""


def test_tensor_parallel_2_without_peer_access_matches_the_published_two_rtx4090_run():
    spec, gpu = from_catalog("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"), resolve_gpu("rtx4090")
    rates = default_rates(gpu)
    assert not rates.p2p  # GeForce Ada: NCCL through host memory, no vLLM custom all-reduce
    mem = engine_memory(spec, gpu_memory_bytes=gpu.memory_bytes,
                        engine=EngineConfig(tp=2, max_model_len=700, gpu_memory_utilization=0.9))
    g = generation_time(spec=spec, matmul_params=matmul_params(spec), rates=rates, tp=2, weight_bytes=mem.weights * 2,
                        kv_bytes_per_token=kv_bytes_per_token(spec, tp=1, dtype_bytes=2), prompts=300,
                        samples_per_prompt=1, prompt_len=100, response_len_max=600, response_len_mean=541,
                        response_len_shape="fixed", max_num_seqs=256, kv_capacity_tokens=mem.num_blocks * mem.block_size,
                        prefix_sharing=False)
    assert g.tp_comm_s > 0.2 * g.total_s  # the all-reduce is a real share of it, not a rounding error
    assert g.total_s == pytest.approx(DBM_TP2_SECONDS, rel=0.10)


@pytest.mark.xfail(strict=True, reason="verl issue #7412: the rollout on four modified RTX 4090 48 GB runs ~3x the "
                   "stock card's engine from its first steps; the cause is not published (module docstring)")
def test_the_issue_7412_rollout_at_its_logged_prompt_length():
    common, kv = _engine("Qwen/Qwen3-4B", "rtx4090-48gb", utilization=0.5, max_model_len=4096)
    assert kv == 97952  # verl's default 0.5 of the card, as benchmarks/step_times.py plans the row
    g = generation_time(prompts=256, samples_per_prompt=5, engines=4, prompt_len=1024, prompt_len_mean=167.0,
                        response_len_max=3072, response_len_mean=1267.0, max_num_seqs=256, kv_capacity_tokens=kv,
                        **common)
    assert g.total_s == pytest.approx(541.19, rel=0.50)
