"""``loop.loss_input_copy`` (OLMo-core ``Trainer.get_losses``: the loop keeps the logits through backward and hands the
compiled loss ``logits[..., :-1, :].contiguous()``, allenai/OLMo-core src/olmo_core/train/trainer.py l.924, 1167-1197
@4f2c8ef59f9268b7f3aae0c127b52a45d4c1c706): the compiled loss saves the copy beside the kept logits (2 B per logit
more than a loss that saves the kept tensor itself), only with more than one sequence per micro-batch; the slice's
``slice_backward`` at any micro-batch (a zero-filled gradient of the logits' shape beside the slice's at the start
of backward); its time, the copy and ``slice_backward``'s zero fill and copy (``compute.inventory.LOSS_INPUT_COPY_*``)."""

from __future__ import annotations

import pytest
from replay_inputs import recorded_plan, replay_gap

from trainfit.compute.inventory import (
    LOSS_INPUT_COPY_BACKWARD_BYTES,
    LOSS_INPUT_COPY_BACKWARD_KERNELS,
    LOSS_INPUT_COPY_FORWARD_BYTES,
    LOSS_INPUT_COPY_FORWARD_KERNELS,
    step_inventory,
)
from trainfit.plan import make_plan
from trainfit.plan.resolve import model_spec_of
from trainfit.spec.card import RunCard

SEQ, VOCAB = 2048, 151936


def _card(mbs: int, copy: bool) -> RunCard:
    return RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", "scope": "full",
                                   "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                                   "batch": {"micro_batch_size": mbs, "seq_len": SEQ}, "loss": {"compiled": True},
                                   "loop": {"keeps_output_through_backward": True, "loss_input_copy": copy}})


def _logits(plan, phase: str) -> float:
    return next(p for p in plan.phases if p.phase.value == phase).components["logits"]


def test_the_copy_is_saved_beside_the_kept_logits():
    e = 2 * SEQ * VOCAB
    kept, copied = make_plan(_card(2, False)), make_plan(_card(2, True))
    for phase in ("forward", "backward"):
        assert _logits(copied, phase) - _logits(kept, phase) == pytest.approx(2 * e, rel=1e-4)  # + per-row terms
    # one sequence per micro-batch: the slice is contiguous, .contiguous() returns it, nothing more is held in the
    # forward; backward's slice_backward makes a zero-filled full gradient beside the slice's: one logits tensor
    # more than the loss's own gradient and its two fp32 values per row
    (one_kept, _), (one_copied, _) = _terms(1, False), _terms(1, True)
    assert (one_copied.forward_peak, one_copied.retained) == (one_kept.forward_peak, one_kept.retained)
    e1 = 2 * SEQ * VOCAB
    assert one_copied.backward_peak - one_kept.backward_peak == pytest.approx(e1 - 8 * SEQ, rel=1e-4)
    # from two sequences the saved copy is released before slice_backward runs: its bytes are already counted
    (two_kept, _), (two_copied, _) = _terms(2, False), _terms(2, True)
    assert two_copied.backward_peak - two_kept.backward_peak == pytest.approx(2 * e1, rel=1e-4)


def _terms(mbs: int, copy: bool):
    """The plan's logits terms (and kept output) for the card."""
    t = recorded_plan(_card(mbs, copy))[1].terms
    return t.logits, t.kept_output


@pytest.mark.parametrize("rows", [1, 2, 4])
def test_start_of_backward_under_the_dispatch_tracker(rows):
    """The loop's lines on CPU tensors, the compiled loss stood in by a Function that holds what
    ``memory.logits.compiled_ce_bytes`` gives it on a GPU (its input saved, two fp32 values per row; backward one
    gradient of its input's shape), counted by the trace's tracker: 6 B per logit at the start of backward with the
    kept logits, at every batch (batch 1: kept, the slice's gradient, slice_backward's zero-filled one; from batch 2
    the saved copy in place of the latter until the loss's node releases it), as the plan's terms give."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from trainfit.memory.logits import compiled_ce_bytes
    from trainfit.trace.tracker import FastTracker

    class StandIn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, torch.empty(x.shape[0]), torch.empty(x.shape[0]))
            return x.new_zeros((), dtype=torch.float32)

        @staticmethod
        def backward(ctx, g):
            return torch.empty_like(ctx.saved_tensors[0])

    s, h, v = 256, 32, 4096
    hidden = torch.randn(rows, s, h, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(v, h, dtype=torch.bfloat16)
    tr = FastTracker()
    tr.add_existing(hidden, w, tag="inputs")
    base = tr.current
    with tr:
        logits = F.linear(hidden, w)  # kept through backward
        shifted = logits[..., :-1, :].contiguous()
        loss = StandIn.apply(shifted.view(-1, v))
        del shifted
        fwd = tr.peak
        tr.peak = tr.current
        loss.backward()
        bwd = tr.peak - hidden.grad.numel() * 2
    e = rows * s * v
    planned = compiled_ce_bytes(tokens=rows * s, vocab_size=v, logits_kept=True, input_copy=rows > 1,
                                slice_backward=True)
    kept = 2 * e
    assert (bwd - base) == pytest.approx(planned.backward_peak + kept, rel=0.01)
    assert (fwd - base) == pytest.approx(planned.forward_peak, rel=0.01)  # the forward's term holds the logits
    assert (bwd - base) / e == pytest.approx(6.0, rel=0.01)


@pytest.mark.parametrize("mbs", [1, 2])
def test_replay_reaches_the_planned_peak(mbs):
    plan, rec = recorded_plan(_card(mbs, True))
    assert rec.shape.fused_ce_slice_backward is True
    replayed, top = replay_gap(plan, rec)
    assert replayed == pytest.approx(top, rel=2e-3)


def test_time_pays_the_copy_and_its_backward():
    spec = model_spec_of(_card(2, True))
    a = step_inventory(spec, micro_batch_size=2, seq_len=SEQ, compiled_cross_entropy=True)
    b = step_inventory(spec, micro_batch_size=2, seq_len=SEQ, compiled_cross_entropy=True, loss_input_copy=True,
                       loss_input_slice_backward=True)
    logits = 2 * SEQ * spec.vocab_size
    assert b.head_forward.fused_bytes - a.head_forward.fused_bytes == pytest.approx(LOSS_INPUT_COPY_FORWARD_BYTES * logits)
    assert b.head_backward.fused_bytes - a.head_backward.fused_bytes == pytest.approx(LOSS_INPUT_COPY_BACKWARD_BYTES * logits)
    assert b.head_forward.kernels - a.head_forward.kernels == LOSS_INPUT_COPY_FORWARD_KERNELS
    assert b.head_backward.kernels - a.head_backward.kernels == LOSS_INPUT_COPY_BACKWARD_KERNELS
    # one sequence: no copy kernel, but slice_backward's zero fill and copy
    c = step_inventory(spec, micro_batch_size=1, seq_len=SEQ, compiled_cross_entropy=True,
                       loss_input_slice_backward=True)
    a1 = step_inventory(spec, micro_batch_size=1, seq_len=SEQ, compiled_cross_entropy=True)
    assert c.head_forward == a1.head_forward
    assert c.head_backward.fused_bytes - a1.head_backward.fused_bytes == pytest.approx(
        LOSS_INPUT_COPY_BACKWARD_BYTES * SEQ * spec.vocab_size)
    assert c.head_backward.kernels - a1.head_backward.kernels == LOSS_INPUT_COPY_BACKWARD_KERNELS
    assert make_plan(_card(1, True)).step_seconds > make_plan(_card(1, False)).step_seconds
    assert make_plan(_card(2, True)).step_seconds > make_plan(_card(2, False)).step_seconds


@pytest.mark.parametrize("data", [{"loss": {"compiled": True}, "loop": {"loss_input_copy": True}},
                                  {"loop": {"keeps_output_through_backward": True, "loss_input_copy": True}}])
def test_refused_without_the_compiled_loss_and_the_kept_logits(data):
    with pytest.raises(ValueError, match="loop.loss_input_copy: the compiled loss's saved copy beside the kept logits"):
        RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", **data})


@pytest.mark.slow
@pytest.mark.parametrize("rows", [2, 1])
def test_real_loop_saves_a_copy_only_for_several_rows(rows):
    """OLMo-core's loss (src/olmo_core/nn/functional/cross_entropy_loss.py, z-loss on) compiled by Inductor on CPU,
    called as get_losses calls it: the bf16 tensor autograd saves is a storage of its own beside the kept logits with
    two rows, the kept logits' own storage with one. Needs a C++ compiler."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    def cross_entropy_loss(logits, labels, *, ignore_index=-100, reduction="sum", compute_z_loss=True,
                           z_loss_multiplier=1e-5):
        logits = logits.float()
        loss = F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction=reduction)
        z_squared = (logits.logsumexp(-1).pow(2) * (labels != ignore_index)).sum()
        return loss, z_loss_multiplier * z_squared

    fn = torch.compile(cross_entropy_loss)
    s, v = 64, 2048
    logits = torch.randn(rows, s, v, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, v, (rows * (s - 1),))
    saved = []

    def pack(t):
        saved.append((t.dtype, t.untyped_storage().data_ptr(), t.numel()))
        return t

    try:
        with torch.compiler.config.patch(force_disable_caches=True), \
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            shifted = logits[..., :-1, :].contiguous().view(-1, v)
            ce, z = fn(shifted, labels)
    except Exception as exc:  # noqa: BLE001 - no C++ toolchain for Inductor here
        pytest.skip(f"Inductor cannot compile here: {exc}")
    (ce + z).backward()
    bf16 = [(ptr, n) for dtype, ptr, n in saved if dtype is torch.bfloat16 and n == rows * (s - 1) * v]
    assert len(bf16) == 1
    same = bf16[0][0] == logits.untyped_storage().data_ptr()
    assert same is (rows == 1)
