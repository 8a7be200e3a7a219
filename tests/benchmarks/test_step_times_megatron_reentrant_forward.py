"""benchmarks/step_times.py, a Megatron-Core MoE row with full recompute (mbvc Qwen3-30B-A3B SFT at 32k on 16 H100s):
Megatron's re-entrant checkpoint runs the layers' first forward under ``torch.no_grad``, which saves autograd
recording on the kernels outside Transformer Engine's Functions (``compute.training.outside_te_kernel_share``): the
planned forward is shorter than with a non-re-entrant checkpoint, by less than the whole no-grad saving, and the
row stays within 50 % of its published step."""

from __future__ import annotations

import json
from pathlib import Path

from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
st = load_step_times("trainfit_bench_step_times_megatron_reentrant_forward")
ROW = next(e for e in json.loads((REPO / "benchmarks" / "data" / "published_train_times_megatron_bridge_verification.json").read_text())
           if e["id"] == "mbvc-qwen3-30b-a3b-sft32k-h100-16g")


def test_megatron_re_entrant_forward_gets_the_outside_te_saving() -> None:
    card, _ = st.map_train(ROW)
    assert card["parallel"]["tensor_parallel_impl"] == "megatron" and card["parallel"]["gradient_checkpointing"]
    reentrant = st.plan_card(card)
    plain = st.plan_card({**card, "loop": {**card.get("loop", {}), "checkpoint_reentrant": False}})
    assert reentrant.parts["forward"] < plain.parts["forward"]
    # the TE linears' and attention's kernels keep the grad rate: far from the eager layers' 0.71 op ratio
    assert reentrant.parts["forward"] > 0.8 * plain.parts["forward"]
    assert abs(reentrant.step_s / ROW["measured"]["value"] - 1.0) <= 0.5
