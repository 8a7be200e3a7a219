"""The engine's host time between two decode steps at a full batch, from a source outside the scored rows, against the
figure ``decode_step`` charges (``decode_step`` module docstring, "The host constants, per path": the split to the
published 19.2 us was evaluated there and not kept). Against the
figure ``decode_step`` charges (``ENGINE_S_PER_STEP`` + ``ENGINE_S_PER_SEQUENCE`` per running sequence, serial with the
GPU in both engine modes; the per-sequence 80 us fitted on the benchmark's fit half); and what the NeMo RL v0.3 blog's
generation phases say about it.

**The published gap.** vllm-project/vllm issue #10634 ("Initial Idea and Design for Asynchronous Scheduling",
2024-11-25, read 2026-12-03): with the V1 ``AsyncLLM`` of pull request #9826 (the engine core in its own process),
Llama2-7b, batch 256, ShareGPT, "the gap between the two decodes at this time is about 5-6ms (token gap)", i.e. the
GPU idles 5-6 ms per step while the core schedules, prepares inputs and updates from the output. The plan's gap at
256 running sequences is 0.58 + 256 x 0.080 = 21.1 ms, 3.5-4x the published one; the gap implies ~19 us per running
sequence ((5.5 - 0.58) / 256). The V1 engine of that issue predates vLLM 0.9.0 (the NeMo RL v0.3 runs) and its
later releases, which only took host work off the step.

**What it explains in the NeMo RL v0.3 blog rows** (benchmarks/data/published_rl_times_nemo_rl_v03_miles_p2p.json; vLLM 0.9.0 V1,
in-process, ``LLM.generate``): host time is most of the planned step for the small and sparse models and a minority
for Llama-3.1-70B at TP 4, which is why their errors split by model size. Planned generation of the Llama-3.1-8B rows
(tree of 5182f6f): ~50 of 81 s is host time (8 ms in-process frontend x 3,964 steps, 80 us x 203k tokens per engine,
0.58 ms x steps), the GPU ~31 s, against 58 / 57 s published (+41 / +42 %); Qwen3-30B-A3B at TP 4 and 128 running
sequences: 18.8 of 28.1 ms per step is host (+41 %); Qwen3-32B at TP 2, 64 running: 13.7 of 29.3 ms (+32 %);
Llama-3.1-70B at TP 4: 14.3 ms of GPU against 8.7 ms of host at one sequence, ~24 of 62 s host over the phase (-24 /
-23 %). Two candidates that would scale with TP were checked and are not it: vLLM's Ray compiled-graph executor,
which NeMo RL uses for every engine of more than one GPU, runs at parity with the multiprocessing one on one host
(vllm-project/vllm pull request #11107, 2024-12-11: Llama-3.1-8B TP 2 on L4, batch 8, 9.43 s vs 9.36 s, "Ray is about
~0.7% slower"), and the KV pool is not short (vLLM 0.9.0's ``determine_available_memory`` counts every other
allocation on the device, ``vllm/v1/worker/gpu_worker.py`` l.196-212 of the 0.9.0 wheel, but NeMo RL v0.3.0 starts the
engines before the policy, "initialize policy_generation before policy", ``nemo_rl/algorithms/grpo.py`` l.301
@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, so no trainer memory is on the device then).

**Why the plan keeps 80 us** (benchmarks/step_times.py on the tree of 5182f6f, only ``ENGINE_S_PER_SEQUENCE`` set to
19.2 us): the generation-phase subset's median |error| goes from 24.2 % to 19.5 % (the blog's 8B rows +41 / +42 % ->
+20 / +21 %, Qwen3-30B-A3B +41 % -> +8 %, Qwen3-32B +32 % -> +19 %), the rows without a published mean response from
43.4 % to 24.0 %, but the RL-step subset from 14.8 % to 22.0 %: NeMo RL's Qwen3-30B-A3B step rows fall from about
0 % to -15 / -25 % on policy and to -31 / -42 % one step off policy (``async_engine``), the Llama-3.1-8B GB200 off-policy
row from +4 % to -35 %. Two things the fitted 80 us stands in for show there. (1) A per-sequence frontend cost of the
asynchronous path: those runs generate through NeMo RL's ``generate_async``, which reads every step's cumulative
``RequestOutput`` of every request (``async for req_output in vllm_request_generator``:
``nemo_rl/models/generation/vllm.py`` l.683-692 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf,
``nemo_rl/models/generation/vllm/vllm_worker_async.py``
l.750-759 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470; vLLM's ``SamplingParams.output_kind`` defaults to ``CUMULATIVE``,
``vllm/sampling_params.py`` l.233 of the 0.9.0 wheel, and the ``OutputProcessor`` builds a ``RequestOutput`` per
request per step unless ``FINAL_ONLY``, ``vllm/v1/engine/output_processor.py`` l.154-172), where the synchronous
path's ``LLM.generate`` asks for the final output only (``vllm/entrypoints/llm.py`` l.1396: ``sp.output_kind =
RequestOutputKind.FINAL_ONLY``). (2) Phases the step rows under-plan: the blog's own Qwen3-30B-A3B step is -13 %
while its generation is +41 % (its actor update -66 %, its log-prob passes -66 %), so in a step total the
over-counted generation offsets them; the v0.4-v0.6 on-policy step rows, which publish no phases, can carry the same
offset. Splitting the constant (the core's per-sequence work near the published gap for the synchronous in-process
path, a per-sequence frontend cost for the streaming path) needs a refit on the fit half with both families
in view; the strict xfail below holds the gap until then.
"""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates

PUBLISHED_GAP_S = (5e-3, 6e-3)
"""GPU idle time between two decode steps at batch 256, V1 AsyncLLM, Llama2-7b (vllm-project/vllm issue #10634)."""
BATCH = 256


def _gap_s(batch: int) -> float:
    """The plan's host time serial with the GPU in one multi-process decode step of ``batch`` sequences (the engine
    core's work: ``DecodeStep.engine_s``); it does not depend on the model."""
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    step = ds.decode_step_seconds(spec=spec, matmul_params=matmul_params(spec), rates=default_rates(resolve_gpu("h100-sxm")),
                                  tp=1, batch=batch, context_tokens=batch * 500.0, weight_bytes=16e9,
                                  kv_bytes_per_token=131072.0, engine_multiprocess=True)
    return step.engine_s


def test_the_plans_gap_is_the_fitted_constants() -> None:
    assert _gap_s(BATCH) == pytest.approx(ds.ENGINE_S_PER_STEP + BATCH * ds.ENGINE_S_PER_SEQUENCE)
    assert _gap_s(1) < 1e-3  # one sequence: the batch-1 residual (ENGINE_S_PER_STEP) and one sequence's share


@pytest.mark.xfail(strict=True, reason="ENGINE_S_PER_SEQUENCE (80 us, fitted) for V1; the published V1 gap at 256 "
                                       "sequences is 5-6 ms; the RTX 4090 offline batches and the RL steps want the "
                                       "80 us (decode_step module docstring)")
def test_the_gap_at_a_full_batch_matches_the_published_one() -> None:
    assert _gap_s(BATCH) <= 1.5 * PUBLISHED_GAP_S[1]


def test_a_v0_engine_pays_its_logged_per_sequence_host_work() -> None:
    """V0 (``rollout.vllm_engine: v0``): one process, the per-sequence figure from verl's V0 per-step logs, no
    separate frontend term."""
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    kw = dict(spec=spec, matmul_params=matmul_params(spec), rates=default_rates(resolve_gpu("h100-sxm")), tp=1,
              batch=BATCH, context_tokens=BATCH * 500.0, weight_bytes=16e9, kv_bytes_per_token=131072.0)
    v0 = ds.decode_step_seconds(**kw, engine_generation="v0")
    v1 = ds.decode_step_seconds(**kw, engine_generation="v1")
    assert v0.engine_s == pytest.approx(ds.ENGINE_S_PER_STEP + BATCH * ds.ENGINE_V0_S_PER_SEQUENCE)
    assert v0.frontend_s == 0.0
    assert v0.total_s >= v1.total_s


def test_cumulative_outputs_add_a_per_sequence_frontend_cost_that_overlaps_a_multiprocess_step() -> None:
    """V1 ``AsyncLLM`` (cumulative outputs): a per-sequence frontend cost, not growing with the tokens held (the fast
    detokenizer hands back its own list); with the core in its own process it overlaps the GPU step."""
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    kw = dict(spec=spec, matmul_params=matmul_params(spec), rates=default_rates(resolve_gpu("h100-sxm")), tp=1,
              batch=BATCH, weight_bytes=16e9, kv_bytes_per_token=131072.0)
    short = ds.decode_step_seconds(**kw, context_tokens=BATCH * 100.0, cumulative_outputs=True)
    long = ds.decode_step_seconds(**kw, context_tokens=BATCH * 4000.0, cumulative_outputs=True)
    final = ds.decode_step_seconds(**kw, context_tokens=BATCH * 4000.0, cumulative_outputs=False)
    assert long.frontend_s == short.frontend_s
    assert long.frontend_s - final.frontend_s == pytest.approx(BATCH * ds.FRONTEND_CUMULATIVE_S_PER_SEQUENCE)
    assert long.total_s == pytest.approx(final.total_s)  # multi-process: under the GPU step
