"""`trainfit.watch(device=...)`: an unknown device is refused by name (it was measured by the CPU tracker in
its place), and device 'cuda' on a torch without CUDA is one trainfit error line (it was torch's raw
AssertionError); `trace --time` refuses the memory-only flags it used to drop."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.watch import watch
from watch_support import tiny_card

ALLOWED = "watch: device: 'cuda', 'cuda:N', 'cpu' or None (CUDA when available)"


@pytest.mark.parametrize("device", ["gpu", "mps", "CPU", "cuda0"])
def test_an_unknown_device_is_refused_by_name(device):
    with pytest.raises(CardError) as info:
        watch(tiny_card(), device=device)
    assert str(info.value) == f"{ALLOWED}, got {device!r}"


def test_cuda_on_a_torch_without_cuda_is_one_trainfit_line():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    w = watch(tiny_card(), device="cuda")
    with pytest.raises(CardError, match=r"^watch: device 'cuda' but torch .* has no CUDA \(.*\); use device='cpu'"
                                        r" or leave device unset$"):
        w.start()


@pytest.mark.parametrize(("flags", "flag"), [(["--reserved"], "--reserved"), (["--mode", "memtracker"], "--mode")])
def test_trace_time_refuses_memory_flags(flags, flag, capsys):
    from trainfit.cli.main import main

    rc = main(["trace", "--gpus", "1", "--strategy", "single", "--time", *flags])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"{flag}: --time counts the step's ops, not its memory; drop {flag} or --time" in err
