"""What the CPU probe must not count: tensors its own module tracker kept alive, and copies a measuring harness
keeps for itself (``Watch.exclude``). Real tensors under PyTorch's MemTracker, no mocked numbers."""

from __future__ import annotations

import gc

import pytest

torch = pytest.importorskip("torch")


def _total(probe) -> int:
    return sum(s["Total"] for s in probe.mt._curr_mem_snap.values())


class _EmbedThenLinear(torch.nn.Module):
    """An embedding whose output is made to require grad by a forward hook (what transformers 5.24.0's
    ``enable_input_require_grads`` installs with gradient checkpointing, modeling_utils.py lines 2153-2154),
    then a child module that receives it."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 256)
        self.proj = torch.nn.Linear(256, 8)
        self.embed.register_forward_hook(lambda mod, inp, out: out.requires_grad_(True))

    def forward(self, ids):
        return self.proj(self.embed(ids))


def test_no_grad_passes_leave_nothing_alive_under_the_tracker():
    """A no-grad pass (generation) whose embedding output is a leaf requiring grad: torch's ModTracker registers a
    multi-grad hook on it, whose closure holds the leaf's AccumulateGrad node, which holds the leaf, so each pass
    leaked its 256 KiB embedding output (the 0.8 MiB 'embedding' bytes the acceptance run's rollout and reward
    phases measured). The probe's tracker registers no gradient hooks under no_grad: after the passes, the total is
    the parameters again."""
    from trainfit.watch.probe import CpuProbe

    model = _EmbedThenLinear()
    probe = CpuProbe()
    probe.open(model)
    try:
        ids = torch.arange(256).remainder(64)[None]  # 1 x 256 tokens -> a 1 x 256 x 256 fp32 output, 256 KiB
        with torch.no_grad():
            model(ids)  # the first call tracks the parameters (the tracker's module pre-hook)
        gc.collect()
        base = _total(probe)
        t = probe.begin()
        with torch.no_grad():
            for _ in range(4):
                model(ids)
        gc.collect()
        peak = probe.end(t).tensor_bytes
        assert _total(probe) == base, f"{(_total(probe) - base) / 2**10:.0f} KiB still counted after the passes"
        assert base + 256 * 2**10 <= peak < base + 3 * 256 * 2**10  # one pass's output at a time, not four
    finally:
        probe.close()


def test_excluded_tensors_leave_the_total_once():
    """``CpuProbe.exclude``: a harness copy's bytes leave the total when excluded, and not a second time when the copy
    is freed (its delete callback goes with it); a tensor not excluded still counts."""
    from trainfit.watch.probe import CpuProbe

    probe = CpuProbe()
    probe.open()
    try:
        base = _total(probe)
        kept = torch.ones(2**18)  # 1 MiB, the harness's copy
        other = torch.ones(2**16)  # 256 KiB, the run's own
        assert _total(probe) == base + 2**20 + 2**18
        assert probe.exclude(kept, "not a tensor") == 2**20
        assert _total(probe) == base + 2**18
        del kept
        gc.collect()
        assert _total(probe) == base + 2**18
        del other
        gc.collect()
        assert _total(probe) == base
    finally:
        probe.close()


def test_watch_exclude_reaches_the_cpu_probe_only():
    """``Watch.exclude`` drops the bytes on the CPU tracker; a probe without ``exclude`` (CUDA: the allocator counts
    every byte) is left alone."""
    from watch_support import tiny_card

    from trainfit.watch.core import Watch

    w = Watch(tiny_card(), device="cpu").start()
    try:
        before = _total(w.probe)
        x = torch.ones(2**18)
        w.exclude(x)
        assert _total(w.probe) == before
    finally:
        w.probe.close()

    class NoExclude:
        pass

    w2 = Watch(tiny_card(), device="cpu")
    w2.probe = NoExclude()
    w2.exclude(torch.ones(4))  # no error, nothing to do
