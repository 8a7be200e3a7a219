"""The model's own loss on the compute-dtype logits (``loss.upcast: false``: Qwen (1.0)'s remote QWenLMHeadModel under
DeepSpeed, where accelerate keeps autocast off): closed form, the pattern replayed under the trace's dispatch tracker,
plan and allocation replay, card refusals."""

from __future__ import annotations

import pytest
from replay_inputs import recorded_plan, replay_gap

from trainfit.memory.logits import compute_dtype_ce_bytes, logits_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard

ROWS, VOCAB, HIDDEN = 256, 32768, 64
E = ROWS * VOCAB


def test_closed_form_per_logit():
    """4 / 2 / 6 B per logit (forward peak / retained / start of backward) against the eager loss's 10 / 4 / 12."""
    b = compute_dtype_ce_bytes(micro_batch_size=1, tokens=ROWS, vocab_size=VOCAB)
    assert (b.forward_peak, b.retained, b.backward_peak) == (4 * E, 2 * E, 6 * E)
    routed = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, compute_dtype_loss=True)
    assert routed == b
    held = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, compute_dtype_loss=True,
                        caller_holds_logits=True)
    assert (held.retained, held.backward_peak) == (4 * E, 8 * E)
    scalar = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, head_outputs=1,
                          compute_dtype_loss=True)
    assert scalar == logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, head_outputs=1)


def test_shift_copy_from_two_sequences():
    """From batch 2 ``.contiguous()`` copies the shifted slice: one more compute-dtype logits tensor at the forward
    peak (6 B per logit in bf16, 12 in fp32), nothing more after it or at the start of backward."""
    for a in (2, 4):
        one = compute_dtype_ce_bytes(micro_batch_size=1, tokens=ROWS, vocab_size=VOCAB, compute_dtype_bytes=a)
        two = compute_dtype_ce_bytes(micro_batch_size=2, tokens=ROWS, vocab_size=VOCAB, compute_dtype_bytes=a)
        assert (two.forward_peak, two.retained, two.backward_peak) == (3 * a * E, a * E, 3 * a * E)
        assert two.forward_peak - one.forward_peak == a * E
        assert (two.retained, two.backward_peak) == (one.retained, one.backward_peak)
    routed = logits_bytes(micro_batch_size=2, seq_len=ROWS // 2, vocab_size=VOCAB, hidden_size=HIDDEN,
                          compute_dtype_loss=True)
    assert routed.forward_peak == 6 * E


@pytest.mark.parametrize(("dtype_name", "rows"), [("float16", 1), ("bfloat16", 1), ("bfloat16", 2), ("float16", 4),
                                                  ("float32", 1), ("float32", 2)])
def test_pattern_under_the_dispatch_tracker(dtype_name, rows):
    """QWenLMHeadModel.forward's loss lines (lm_head, the shifted slice made contiguous, CrossEntropyLoss) on CPU
    tensors of ``rows`` sequences, counted by the trace's tracker: the closed form (the slice copied from two rows
    on), and at batch 1 in half precision the eager constants with a ``.float()`` copy (within 1 %: the shifted slice
    scores s - 1 of the s rows)."""
    torch = pytest.importorskip("torch")
    from trainfit.trace.tracker import FastTracker

    dtype = getattr(torch, dtype_name)
    s, h, v = 512, 32, 4096

    def measure(upcast: bool) -> tuple[float, float, float]:
        torch.manual_seed(0)
        hidden = torch.randn(rows, s, h, dtype=dtype, requires_grad=True)
        w = torch.randn(v, h, dtype=dtype)  # a frozen head (LoRA without trained embeddings, Q-LoRA)
        labels = torch.randint(0, v, (rows, s))
        tr = FastTracker()
        tr.add_existing(hidden, w, labels, tag="inputs")
        base = tr.current
        with tr:
            lm_logits = torch.nn.functional.linear(hidden, w)
            shift = lm_logits[..., :-1, :].contiguous()
            if upcast:
                shift = shift.float()
            loss = torch.nn.CrossEntropyLoss()(shift.view(-1, v), labels[..., 1:].contiguous().view(-1))
            del lm_logits, shift
            retained, fwd = tr.current, tr.peak
            tr.peak = tr.current
            loss.backward()
            bwd = tr.peak
        grad = hidden.grad.numel() * hidden.grad.element_size()
        e = rows * s * v
        return (fwd - base) / e, (retained - base) / e, (bwd - base - grad) / e

    e = rows * s * v
    closed = compute_dtype_ce_bytes(micro_batch_size=rows, tokens=rows * s, vocab_size=v,
                                    compute_dtype_bytes=torch.empty((), dtype=dtype).element_size())
    assert measure(False) == pytest.approx((closed.forward_peak / e, closed.retained / e, closed.backward_peak / e),
                                           rel=0.01)
    if rows > 1 or dtype is torch.float32:
        return
    eager = logits_bytes(micro_batch_size=1, seq_len=s, vocab_size=v, hidden_size=h)
    assert measure(True) == pytest.approx((eager.forward_peak / (s * v), eager.retained / (s * v),
                                           eager.backward_peak / (s * v)), rel=0.01)


def _card(mbs: int = 1, compute: str = "bf16", **loss) -> RunCard:
    return RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", "scope": "full",
                                   "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                                   "precision": {"compute": compute},
                                   "batch": {"micro_batch_size": mbs, "seq_len": 4096}, "loss": loss})


@pytest.mark.parametrize(("mbs", "compute"), [(2, "bf16"), (1, "fp32"), (2, "fp32")])
def test_plan_and_replay_of_the_shift_copy_and_the_dtype(mbs, compute):
    """The plan's forward logits term grows by the copy from batch 2, and the replay allocates the loss's tensors in
    the compute dtype with that copy: the replayed forward holds what the plan's forward phase does."""
    plan, rec = recorded_plan(_card(mbs, compute, upcast=False))
    base = make_plan(_card(1, compute, upcast=False))
    a = 4 if compute == "fp32" else 2
    fwd = next(p for p in plan.phases if p.phase.value == "forward").components["logits"]
    fwd1 = next(p for p in base.phases if p.phase.value == "forward").components["logits"]
    e = 4096 * 151936
    assert fwd - mbs * fwd1 == pytest.approx((a * mbs * e) if mbs > 1 else 0.0, rel=1e-3)
    assert rec.shape.ce_compute_dtype_bytes == a and rec.shape.ce_shift_copy is (mbs > 1)
    replayed, top = replay_gap(plan, rec)
    assert replayed == pytest.approx(top, rel=2e-3)


def test_plan_peak_and_replay():
    """The compute-dtype loss plans 6 B per logit less than the eager loss at the start of backward (12 -> 6), and
    its replayed allocation sequence reaches the planned allocated peak."""
    e = 4096 * 151936
    peaks = {}
    for name, loss in (("eager", {}), ("compute", {"upcast": False})):
        plan, rec = recorded_plan(_card(**loss))
        bwd = next(p for p in plan.phases if p.phase.value == "backward")
        peaks[name] = bwd.components["logits"]
        assert rec.shape.ce_compute_dtype is (name == "compute")
        replayed, top = replay_gap(plan, rec)
        assert replayed == pytest.approx(top, rel=2e-3)
        assert plan.peak.allocated <= plan.peak.reserved <= plan.peak.device
    assert peaks["eager"] - peaks["compute"] == pytest.approx(6 * e, rel=1e-3)


@pytest.mark.parametrize(("data", "message"), [
    ({"loss": {"upcast": False, "chunked": True}}, "loss.upcast: false"),
    ({"loss": {"upcast": False, "kernel": "flash_attn"}}, "loss.upcast: false"),
    ({"loss": {"upcast": False, "compiled": True}}, "loss.upcast: false"),
    ({"method": "dpo", "loss": {"upcast": False}}, "loss.upcast: false"),
    ({"hardware": {"gpus_per_node": 2}, "parallel": {"tensor_parallel": 2}, "loss": {"upcast": False}},
     "loss.upcast: false"),
])
def test_refused_in_one_line(data, message):
    with pytest.raises(ValueError) as err:
        RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", **data})
    assert message in str(err.value)


def test_default_upcasts():
    assert _card().loss.upcast is True
