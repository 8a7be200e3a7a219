"""Eager attention with one KV head (MQA, Gemma-2B): ``repeat_kv`` reshapes k / v expanded to (b, 1, n_rep, s, d), whose
merged dim has stride 0, so the reshape is a view of k / v; ``torch.matmul`` folds (b, H) into bmm's batch, a view only
for b = 1, so with one sequence ``q@k^T`` / ``p@v`` save the kv-wide tensors and with more a heads-wide copy
(``memory.activations._attention``). Before, the plan was +1.98% over the trace at b = 1."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

MQA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
       "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 8192}
CASES = [GridCase("llama_mqa", attention="eager", seq_len=512),
         GridCase("llama_mqa", attention="eager", seq_len=512, scope="lora", ckpt=True),
         GridCase("llama_mqa", attention="eager", seq_len=256, micro_batch_size=4)]


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_mqa_eager_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "llama_mqa", MQA)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert abs(assert_plan_matches_trace(case, plan, traced, tolerance=0.01)) < 0.005
