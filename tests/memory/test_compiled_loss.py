"""The compiled eager loss (``loss.compiled``: torchtitan's ``build_cross_entropy_loss`` under ``training.compile``):
closed form, plan, allocation replay, card refusals, and the saved tensors of the real compiled function on CPU."""

from __future__ import annotations

import pytest
from replay_inputs import recorded_plan, replay_gap

from trainfit.memory.logits import COMPILED_CE_ROW_SAVED_BYTES, compiled_ce_bytes, logits_bytes
from trainfit.spec.card import RunCard

ROWS, VOCAB, HIDDEN = 256, 32768, 64
E = ROWS * VOCAB


def test_closed_form_per_logit():
    """2 B per logit at the forward peak and after it (+ 8 B per row), 4 B at the start of backward; the eager
    loss's 10 / 4 / 12 B otherwise."""
    b = compiled_ce_bytes(tokens=ROWS, vocab_size=VOCAB)
    assert (b.forward_peak, b.retained, b.backward_peak) == (2 * E + 8 * ROWS, 2 * E + 8 * ROWS, 4 * E + 8 * ROWS)
    kept = compiled_ce_bytes(tokens=ROWS, vocab_size=VOCAB, logits_kept=True)
    assert (kept.retained, kept.backward_peak) == (8 * ROWS, 2 * E + 8 * ROWS)
    routed = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, loss_compiled=True)
    assert routed == b
    eager = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN)
    assert (eager.forward_peak, eager.retained, eager.backward_peak) == (10 * E, 4 * E, 12 * E)
    scalar = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, head_outputs=1,
                          loss_compiled=True)
    assert scalar == logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, head_outputs=1)
    softcap = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, loss_compiled=True,
                           softcap_bytes_per_logit=2)
    assert softcap.backward_peak - b.backward_peak == 2 * E


def _card(**loss) -> RunCard:
    return RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", "scope": "full",
                                   "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                                   "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": loss})


def test_plan_peak_and_replay():
    """A compiled-loss card plans 8 B per logit less than the eager loss at the start of backward (12 -> 4); its
    replayed allocation sequence (flash-attn's order, two saved per-row tensors) reaches the planned allocated peak
    to within 0.2%, as the flash-attn card's does."""
    e = 2 * 2048 * 151936
    peaks = {}
    for name, loss in (("eager", {}), ("compiled", {"compiled": True})):
        plan, rec = recorded_plan(_card(**loss))
        bwd = next(p for p in plan.phases if p.phase.value == "backward")
        peaks[name] = bwd.components["logits"]
        assert rec.shape.fused_ce_compiled is (name == "compiled")
        replayed, top = replay_gap(plan, rec)
        assert replayed == pytest.approx(top, rel=2e-3)
    assert peaks["eager"] - peaks["compiled"] == pytest.approx(8 * e, rel=1e-3)
    assert peaks["compiled"] == pytest.approx(4 * e, rel=1e-3)


@pytest.mark.parametrize(("data", "message"), [
    ({"loss": {"compiled": True, "chunked": True}}, "loss.compiled: the compiled eager cross-entropy over the full"),
    ({"loss": {"compiled": True, "kernel": "flash_attn"}}, "loss.compiled: the compiled eager cross-entropy over the full"),
    ({"method": "dpo", "loss": {"compiled": True}}, "not planned with method dpo"),
    ({"hardware": {"gpus_per_node": 2}, "parallel": {"tensor_parallel": 2}, "loss": {"compiled": True}},
     "loss.compiled: the compiled cross-entropy over the labels of an sft step"),
    ({"parallel": {"tensor_parallel_impl": "megatron"}, "loss": {"compiled": True}},
     "loss.compiled: the compiled cross-entropy over the labels of an sft step"),
])
def test_refused_in_one_line(data, message):
    with pytest.raises(ValueError) as err:
        RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", **data})
    assert message in str(err.value)


def test_default_is_the_eager_loss():
    assert _card().loss.compiled is False


@pytest.mark.slow
def test_real_compiled_function_saves_what_the_terms_say():
    """torchtitan's loss (torchtitan/components/loss.py @bbb1b616ef4d) compiled by Inductor on CPU: the tensors
    autograd saves are the bf16 logits and two fp32 values per row (besides the int64 labels the caller holds
    anyway and scalars), and its backward's only logits-sized buffer is the bf16 gradient. Needs a C++ compiler."""
    torch = pytest.importorskip("torch")
    from torch._inductor.utils import run_and_get_code

    def cross_entropy_loss(pred, labels):
        return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))

    n, v = 128, 4096
    pred = torch.randn(1, n, v, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, v, (1, n))
    saved: list[tuple[tuple[int, ...], torch.dtype, int]] = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype, t.numel() * t.element_size()))
        return t

    fn = torch.compile(cross_entropy_loss)

    def run():
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = fn(pred, labels)
        loss.backward()

    try:
        _, codes = run_and_get_code(run)
    except Exception as exc:  # noqa: BLE001 - no C++ toolchain for Inductor here
        pytest.skip(f"Inductor cannot compile here: {exc}")
    held = sum(b for _, dtype, b in saved if dtype is not torch.int64 and b > 8)
    assert held == compiled_ce_bytes(tokens=n, vocab_size=v).retained
    assert COMPILED_CE_ROW_SAVED_BYTES * n == sum(b for s, d, b in saved if d is torch.float32 and b > 8)
    backward = codes[-1]
    assert f"({n}, {v})" in backward and "torch.bfloat16" in backward
    logits_sized = [ln for ln in backward.splitlines() if "empty_strided" in ln and f"({n}, {v})" in ln]
    assert len(logits_sized) == 1 and "torch.bfloat16" in logits_sized[0]
