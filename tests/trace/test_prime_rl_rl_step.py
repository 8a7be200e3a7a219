"""prime-rl's RL micro-step (its fused log-prob head and ``compute_loss``, copied in
``benchmarks/trace_prime_rl_rl_step.py`` with their citations) traced on fake tensors against trainfit's plan of
the card with ``loss.kernel: prime_rl``: the plan holds what the RL loss keeps alive (the null result of the
held-out prime-rl points' RL gap, documented in that script)."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
WORKSPACE = 64 << 20  # the plan's cuBLAS workspace, which the trace does not allocate


@pytest.fixture(scope="module")
def script():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import trace_prime_rl_rl_step

    return trace_prime_rl_rl_step


@pytest.mark.slow
def test_rl_loop_peak_is_planned_with_the_prime_rl_head(script):
    card = script.card_of(4096, "full", True)
    traced = script.traced(card, "rl")
    planned = script.planned(card) - WORKSPACE
    assert planned == pytest.approx(max(traced.values()), rel=0.03)
    # the RL loop's backward stays far below the transformers loop's full-vocabulary logits
    assert traced["backward"] < 0.6 * script.traced(script.card_of(4096, "full", False), "hf")["backward"]


def test_compute_loss_copy_runs_on_fake_tensors(script):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        n = 16
        lp = torch.randn(n, requires_grad=True)
        loss, stats = script.compute_loss(lp, torch.randn(n), torch.randn(n), torch.ones(n, dtype=torch.bool), n)
        loss.backward()
    assert loss.shape == () and lp.grad.shape == (n,) and len(stats) == 6
