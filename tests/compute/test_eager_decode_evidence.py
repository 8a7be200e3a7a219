"""The one-sequence eager decode step against a published per-step log (``decode_step`` module docstring, "Eager
decode against published per-step logs").

dingxianzhong/play-verl ``logs/verl_qwen2_7b_min.log`` @7716a615fc4b68961f2bb7716c9aadcd65ca28d2: Qwen2-7B-Instruct,
one H100 per vLLM 0.8.3 engine (V1, ``enforce_eager``), 64 sequences per engine, prompts ~93 tokens. Over the run's
111 training steps (steps 2-140 without validation or checkpoint steps) ``timing_s/gen`` grows by 8.3 +- 0.4 ms per
token of ``response_length/max`` (least squares with the mean response length as a second regressor): the phase
ends with the longest sequence, running alone in its engine, so that slope is one eager step of one sequence at a
context of ~1k tokens. The plan prices it at the transformers training-forward launch cost per kernel (19.3 ms);
strict xfail until the eager launch is priced as vLLM's inference-mode forward together with the per-phase cost
of verl's generation timer that the over-priced launch now offsets (module docstring).

The combined change was tried and not applied (benchmarks/step_times.py on one tree, 2026-12-02; generation subset
median |error| fit half / held-out half, RL step subset fit / held-out): 26 us per eager kernel for vLLM, 2.5 s
per synchronous verl generation phase added to the plan (inside ``gen`` and the step), verl's 0.7/0.8 eager
engines in-process with NCCL all-reduce. Today 16 % (1 row) / 13 % (6 rows), RL steps 21 % / 20 %. 26 us + 2.5 s:
2 % / 29 % (ROCm deepseek-llm-7b +2 % -> -27 %, -15 % -> -36 %; DeepSeek-V3 H20 -11 % -> -60 %; play-verl Qwen2-7B
+58 % -> 0 %, +73 % -> +31 %), RL steps 16 % / 21 %. 35 us + 2.5 s: 6 % / 24 %. Adding the in-process engine with
the 8 ms frontend fitted on NeMo RL rows: 29 % / 38 % (the 0.5B phases +25-29 %; the measured 8.3 ms step has
no room for it). NCCL instead of the custom all-reduce moves the TP 2/4 rows by 1-2 points. The held-out half
gets worse in every variant: the ROCm rows need their larger per-token cost as well as a larger per-kernel one,
and DeepSeek-V3's eager step more kernels than ``decode_kernels`` counts. Nothing outside the scored logs gave
the per-kernel figure for vLLM at batch 1 (a blog, cloudai.pt "CUDA Graphs + torch.compile: 1.65x LLM Decode
Speedup", read 2026-12-02, quotes Llama-3.1-8B on an H100 SXM at 8.4 ms eager / 5.1 ms graphed per decode step,
~26 us over trainfit's 320 kernels, but names neither the engine nor its source run). Later verl logs that time
the parts of ``gen`` apart (``timing_s/reshard``, ``timing_s/generate_sequences``; verl mid-2025, one GPU of
unstated type: Qwen2.5-0.5B under vLLM 0.8.5, SmolLM2-135M) leave 0.39-0.63 s of ``gen`` outside both and
0.15-0.43 s of reshard: there the timer's non-generation part is under 1.1 s, so play-verl's 2.4-2.6 s residual
(verl 0.3-era sharding manager) is not a general property of verl's timer, or lies inside generate_sequences.
"""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN2_7B = from_catalog("Qwen/Qwen2-7B-Instruct")
MEASURED_S = 8.3e-3
"""Slope of ``timing_s/gen`` over ``response_length/max``, play-verl min log (module docstring)."""
MEASURED_SE_S = 0.4e-3


def _one_sequence_eager_step() -> ds.DecodeStep:
    spec = QWEN2_7B
    kv_per_token = 2.0 * spec.num_layers * spec.kv_dim * 2  # bf16 K and V over all layers
    return ds.decode_step_seconds(spec=spec, matmul_params=matmul_params(spec), rates=H100, tp=1, batch=1,
                                  context_tokens=93 + 870, weight_bytes=total_params(spec) * 2.0,
                                  kv_bytes_per_token=kv_per_token, cuda_graphs=False)


def test_the_one_sequence_step_is_bounded_below_by_its_weight_read():
    """Whatever prices the launch, one eager step of Qwen2-7B on an H100 reads its 15.2 GB of weights: the
    measured 8.3 ms leaves room for it (5.1 ms at the card's sustained bandwidth), and so must the plan."""
    step = _one_sequence_eager_step()
    assert step.bandwidth_s == pytest.approx(total_params(QWEN2_7B) * 2.0 / H100.hbm_bytes_per_s, rel=0.01)
    assert step.bandwidth_s < MEASURED_S - 2 * MEASURED_SE_S
    assert step.total_s >= step.bandwidth_s + step.engine_s


@pytest.mark.xfail(strict=True, reason="eager launch priced at the training-forward host cost per kernel "
                                       "(65 us x 280 kernels); vLLM 0.8.3's inference-mode forward measures ~26 us, "
                                       "not applied: it worsens the held-out generation rows (module docstring)")
def test_the_one_sequence_eager_step_matches_the_published_log():
    step = _one_sequence_eager_step()
    assert step.total_s == pytest.approx(MEASURED_S, abs=3 * MEASURED_SE_S + 0.1 * MEASURED_S)
