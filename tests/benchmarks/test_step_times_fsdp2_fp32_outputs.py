"""benchmarks/step_times.py, the NeMo RL DTensor Llama-3.1-8B rows (nemorl-v03blog-* and nemorl-issue959-rerun-*,
8 H100): NeMo RL's FSDP2 modules cast their outputs to fp32 (``compute.fsdp2_output_cast``; parallelize.py l.464-488
@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf). The update's 64 micro-batches of 4096 tokens pay 63 hidden-state casts
each way and the four sequences' fp32 slice backward: about 29 GB a micro-batch, 0.5-1.0 s over the update; the
log-prob passes the forward casts only. The update stays under its published 38 and 40 s."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_fsdp2_fp32_outputs")
IDS = ("nemorl-v03blog-grpo-llama31-8b-dtensor-h100-8g", "nemorl-issue959-rerun-grpo-llama31-8b-dtensor-h100-8g")
ENTRIES = {e["id"]: e for e in S.load_entries(S.RL_DATA) if e["id"] in IDS}


def _phases(entry, monkeypatch, *, casts: bool) -> dict[str, float]:
    import trainfit.plan.rl_passes as rp
    import trainfit.plan.time as pt

    if not casts:  # the casts alone off: nemo_rl_dtensor also decides the packed passes' syncs (nemo_rl_dtensor_packed)
        for mod, name in ((pt, "train_step_time"), (rp, "forward_only_time")):
            real = getattr(mod, name)
            monkeypatch.setattr(mod, name, lambda *a, _real=real, **k: _real(*a, **{**k, "fsdp2_fp32_outputs": False}))
    card, _ = S.map_rl(entry)
    planned = S.plan_card(card)
    return {k[5:]: v for k, v in planned.parts.items() if k.startswith("time.")}


@pytest.mark.parametrize("row_id", IDS)
def test_the_casts_slow_the_update_by_their_bytes(row_id: str, monkeypatch) -> None:
    e = ENTRIES[row_id]
    with_casts = _phases(e, monkeypatch, casts=True)
    monkeypatch.undo()
    without = _phases(e, monkeypatch, casts=False)
    added = with_casts["actor_update"] - without["actor_update"]
    assert 0.5 < added < 1.0
    assert 0.0 < with_casts["old_logprob"] - without["old_logprob"] < added / 2
    assert with_casts["actor_update"] < e["measured"]["phases_s"]["actor_update"]
