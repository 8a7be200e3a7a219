"""``loop.loss_input_copy`` (OLMo-core ``Trainer.get_losses``: the loop keeps the logits through backward and hands the
compiled loss ``logits[..., :-1, :].contiguous()``, allenai/OLMo-core src/olmo_core/train/trainer.py l.924, 1167-1197
@4f2c8ef59f9268b7f3aae0c127b52a45d4c1c706): the compiled loss saves the copy beside the kept logits (2 B per logit
more than a loss that saves the kept tensor itself), only with more than one sequence per micro-batch; its time, the
copy and ``slice_backward``'s zero fill and copy (``compute.inventory.LOSS_INPUT_COPY_*``)."""

from __future__ import annotations

import pytest

from trainfit.compute.inventory import (
    LOSS_INPUT_COPY_BACKWARD_BYTES,
    LOSS_INPUT_COPY_BACKWARD_KERNELS,
    LOSS_INPUT_COPY_FORWARD_BYTES,
    LOSS_INPUT_COPY_FORWARD_KERNELS,
    step_inventory,
)
from trainfit.memory import alloc_sequence
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
    # one sequence per micro-batch: the slice is contiguous, .contiguous() returns it, nothing more is held
    assert make_plan(_card(1, True)).phases == make_plan(_card(1, False)).phases


def test_replay_reaches_the_planned_peak():
    with alloc_sequence.recording() as made:
        plan = make_plan(_card(2, True))
    rec = made[-1]
    seq = alloc_sequence.step_sequence(rec.terms, rec.shape, workspace=rec.workspace)
    top = max(p.allocated for p in plan.phases)
    assert alloc_sequence.replay(seq, expandable=rec.expandable).peak_allocated == pytest.approx(top, rel=2e-3)


def test_time_pays_the_copy_and_its_backward():
    spec = model_spec_of(_card(2, True))
    a = step_inventory(spec, micro_batch_size=2, seq_len=SEQ, compiled_cross_entropy=True)
    b = step_inventory(spec, micro_batch_size=2, seq_len=SEQ, compiled_cross_entropy=True, loss_input_copy=True)
    logits = 2 * SEQ * spec.vocab_size
    assert b.head_forward.fused_bytes - a.head_forward.fused_bytes == pytest.approx(LOSS_INPUT_COPY_FORWARD_BYTES * logits)
    assert b.head_backward.fused_bytes - a.head_backward.fused_bytes == pytest.approx(LOSS_INPUT_COPY_BACKWARD_BYTES * logits)
    assert b.head_forward.kernels - a.head_forward.kernels == LOSS_INPUT_COPY_FORWARD_KERNELS
    assert b.head_backward.kernels - a.head_backward.kernels == LOSS_INPUT_COPY_BACKWARD_KERNELS
    one = make_plan(_card(1, True)).step_seconds
    assert one == make_plan(_card(1, False)).step_seconds
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
