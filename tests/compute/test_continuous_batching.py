"""``continuous_batching._simulate_decode`` under heavy KV preemption of a batch whose lengths crowd the cap.

The time-invariant sweep (``benchmarks/time_invariants.py``: response lengths 128 tokens apart must never shorten
generation) finds generation falling 5-17 % when ``response_len`` grows by 128 tokens on colocated GRPO cards whose
engine holds about 100 of its 256 sequences (Qwen3-0.6B on one H100, 32 prompts x 8, responses 2,432-3,840 tokens:
101, 104, 133, 111, 141 s for 3,328 ... 3,840). The fluid loses 11-13 % of the batch's tokens there: a readmitted
fresh-sequence equivalent that is preempted again owes ``E[L - (age + carried) | L > age + carried]`` fresh
equivalents, i.e. the carried context counted as progress of a sequence whose length the fluid already drew afresh,
so whether a readmitted sliver survives to the wave's end (and runs a whole longest length at a batch of 1-3) flips
with small changes of the cap. Counting only the equivalent's own age (``E[L - age | L > age]``) conserves the
tokens (99.9 %) and makes the phase monotone (133, 139, 146, 152, 158 s), but it overshoots a step-by-step
simulation of the sequences by 14 % on that card and by 25-35 % on tests/compute/test_decode_empty_engine.py's
heavy-preemption card (the equivalents compress many short remainders into few full-length draws), and moved the
benchmark's generation subset median 17.9 -> 18.6 % (NeMo RL's 64-GPU Qwen3-32B phase +16 -> +81 %); it was not
kept. The strict xfails below flip when a fix lands (re-queueing preempted sequences with their remainder lengths).
"""

from itertools import pairwise

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import generation as gen
from trainfit.compute.continuous_batching import _simulate_decode
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

QWEN06 = from_catalog("Qwen/Qwen3-0.6B")
SEQUENCES = 256  # 32 prompts x 8 samples on one engine
PROMPT = 512.0
KV_CAPACITY = 355_616  # the plan's engine for this card: about 100 sequences of ~3.5k tokens
MEANS = {3328: 2755.436, 3456: 2841.418, 3584: 2926.117, 3712: 3009.554, 3840: 3091.747}
"""The plans' mean response at each cap (the length profile auto picks for these caps, ``rollout.length_profile``)."""


def _step():
    return gen._step_model(spec=QWEN06, matmul_params=matmul_params(QWEN06),
                           rates=default_rates(resolve_gpu("h100-sxm")), tp=1,
                           weight_bytes=total_params(QWEN06) * 2.0,
                           kv_bytes_per_token=2.0 * QWEN06.num_layers * QWEN06.kv_dim * 2, cuda_graphs=True,
                           engine_s_per_step=gen.ENGINE_S_PER_STEP, tp_all_reduce_latency_s=None)


def _decode(response_len: int):
    mean = MEANS[response_len]
    groups = gen.response_length_groups(shape="exponential", response_len_max=response_len, response_len_mean=mean,
                                        sequences=SEQUENCES)
    chunk = max(response_len / 40, min(32, mean / 4))
    return _simulate_decode(groups=groups, sequences=SEQUENCES, slots=256, prompt_len=PROMPT, kv_prompt=PROMPT / 8,
                            kv_capacity=KV_CAPACITY, chunk=chunk, step=_step()), mean


def test_the_card_preempts_heavily():
    d, _ = _decode(3584)
    assert d.preempted > 50 and d.peak == 256


@pytest.mark.xfail(strict=True, reason="re-preempted readmitted equivalents owe E[L - (age + carried) | ...]: 11-13 %"
                   " of the tokens vanish (module docstring)")
def test_heavy_preemption_conserves_the_generated_tokens():
    for response_len in (3328, 3584, 3840):
        d, mean = _decode(response_len)
        assert d.tokens == pytest.approx(SEQUENCES * mean, rel=0.02)


@pytest.mark.xfail(strict=True, reason="whether a readmitted sliver survives the wave flips with the cap: the phase"
                   " is not monotone in response_len under heavy preemption (module docstring)")
def test_a_longer_cap_never_shortens_the_decode_under_preemption():
    times = [_decode(r)[0].seconds for r in range(3328, 3841, 128)]
    assert all(b >= a * 0.999 for a, b in pairwise(times)), times
