"""The warm-up that creates the optimizer states (one step on zero gradients) leaves the same state as a
full forward/backward/step warm-up: every phase's peak and breakdown is equal to the byte."""

import pytest

torch = pytest.importorskip("torch")

from trainfit.trace import step  # noqa: E402
from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

TINY = dict(model_type="qwen3", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, vocab_size=512, tie_word_embeddings=False)


@pytest.mark.parametrize("kw", [dict(gradient_checkpointing=True, replay_allocator=True),
                                dict(world_size=2, scope="lora")], ids=["ckpt-reserved", "fsdp2-lora"])
def test_optimizer_step_warm_up_equals_a_full_step(monkeypatch, kw):
    req = TraceRequest(hf_config=TINY, seq_len=64, layers=2, **kw)
    fast = trace_step(req)

    def full_step(model, opt):  # noqa: ANN001, ANN202 - the warm-up the trace used to run
        ids = torch.randint(0, TINY["vocab_size"], (req.micro_batch_size, req.seq_len))
        step._forward(model, ids, req).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    monkeypatch.setattr(step, "_warm_optimizer", full_step)
    slow = trace_step(req)
    assert [(p.name, p.peak_bytes, p.breakdown) for p in fast.phases] == [
        (p.name, p.peak_bytes, p.breakdown) for p in slow.phases]
    assert fast.reserved_bytes == slow.reserved_bytes
