"""A DPO plan under tensor and pipeline parallel against the fake-tensor trace of the same rank.

The trace runs tensor parallel (torch's DTensor plan with ``loss_parallel``) and a 1F1B pipeline stage for train steps
only, so what is compared is what it can run:

* the policy's phases (forward, backward, optimizer step) of the DPO plan, less the reference's weights, against the
  traced train step of the chosen+rejected batch (2 x micro-batch) on that rank: under a vocabulary-parallel head the
  DPO token log-probs are planned with the rank's own loss region, which is what the traced step runs;
* the frozen reference's weights on the rank against the traced rank's parameters, to the byte: the traced weights
  also hold the rotary embedding's two fp32 buffers of head_dim / 2 values, ``inv_freq`` and ``original_inv_freq``
  (transformers 5.24.0 models/llama/modeling_llama.py l.87-88), which the plan's weights do not count.

The reference's no-grad pass on a tensor-parallel rank is the per-op forward-only model run on the rank's shard spec
(``plan.walk.dpo_rank_reference``); the trace does not run RL passes under tensor parallel, so it is not compared.
"""

from __future__ import annotations

import pytest

from trainfit.accuracy.grid import ARCHS, GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

TP_TOLERANCE = 0.001  # the tensor-parallel grid's (benchmarks/accuracy.md: within 0.1% per rank)
PP_TOLERANCE = 0.01  # one 1F1B stage (the pipeline grid's backward sits at +0.7%)

CASES = (
    (GridCase("llama", world_size=2, tensor_parallel=2, seq_len=512), "gpu"),
    (GridCase("qwen3", world_size=2, tensor_parallel=2, sequence_parallel=True, seq_len=512), "gpu"),
    (GridCase("llama", world_size=4, tensor_parallel=4, sequence_parallel=True, ckpt=True, seq_len=512), "gpu"),
    (GridCase("llama", world_size=8, tensor_parallel=2, sequence_parallel=True, seq_len=512), "gpu"),
    (GridCase("llama", world_size=2, pipeline_parallel=2, micro_batches=4, seq_len=512), "host_swap"),
    (GridCase("llama", world_size=2, pipeline_parallel=2, pipeline_stage=1, micro_batches=4, seq_len=512),
     "host_swap"),
)


def _dpo_plan(case: GridCase, reference: str):
    card = case.card() | {"method": "dpo", "roles": {"reference": reference}}
    return {p.phase.value: p for p in case.planned_phases(make_plan(load_card_dict(card)))}


def _traced(case: GridCase):
    return trace_step(TraceRequest(**(case.trace_kwargs() | {"micro_batch_size": 2 * case.micro_batch_size})))


@pytest.mark.parametrize("case, reference", CASES, ids=[f"{c.name}-ref_{r}" for c, r in CASES])
def test_dpo_rank_matches_the_trace(case, reference):
    planned = _dpo_plan(case, reference)
    traced = _traced(case)
    tol = PP_TOLERANCE if case.pipeline_parallel > 1 else TP_TOLERANCE
    assert "ref_logprob" in planned and planned["ref_logprob"].components["logprob_pass"] > 0
    for t in traced.phases:
        p = planned[t.name]
        ref_w = p.components.get("reference_weights", 0.0)
        err = (p.tensor_bytes - ref_w) / t.peak_bytes - 1
        assert abs(err) <= tol, f"{t.name}: plan {(p.tensor_bytes - ref_w) / 2**20:.3f} MiB less the reference," \
                                f" trace {t.peak_bytes / 2**20:.3f} MiB, error {err:+.3%}"
        if reference == "gpu":
            rotary_buffers = 2 * (ARCHS[case.arch]["head_dim"] // 2) * 4
            assert ref_w == t.breakdown["weights"] - rotary_buffers
