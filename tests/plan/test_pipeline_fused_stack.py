"""Why ``trainfit.fit`` finds 2 x RTX 4090 at pipeline parallel 2 more than twice as fast as one RTX 4090 (the
python-api doc example: Qwen3-0.6B, LoRA, chunked loss, AdamW, gradient checkpointing, 16,384 tokens a step either
way). Not a pipeline term: a card with tensor or pipeline parallel > 1 is timed on Megatron-Core's Transformer Engine
layers (``plan.time.fused_kernels``: fused norm + linear, RoPE, SwiGLU, cross-entropy), while the one-GPU row is timed
eager (transformers + PEFT), which on this card is memory- and launch-bound. Timed on the same fused stack
(``parallel.tensor_parallel_impl: megatron``), one GPU takes 1.35 s and the pipeline's 0.91 s is 1.48x: sublinear,
the rest of 2x being the one-micro-step bubble, the last stage's head and the stage's smaller GEMMs."""

from __future__ import annotations

import trainfit
from trainfit.plan.time import fused_kernels

CARD = {"model": "Qwen/Qwen3-0.6B", "scope": "lora", "loss": {"chunked": True}, "precision": {"optimizer": "adamw"},
        "parallel": {"gradient_checkpointing": True, "offload": "none"}}
ONE = {"hardware.gpu": "rtx4090", "hardware.gpus_per_node": 1, "batch.micro_batch_size": 8, "batch.grad_accum": 1,
       "parallel.strategy": "single"}
# the knobs fit chose for the 2 x RTX 4090 row
PP2 = {"hardware.gpu": "rtx4090", "hardware.gpus_per_node": 2, "batch.micro_batch_size": 1, "batch.grad_accum": 8,
       "parallel.strategy": "ddp", "parallel.pipeline_parallel": 2}
FUSED = {"parallel.tensor_parallel_impl": "megatron"}


def _time(overrides: dict):
    p = trainfit.plan(CARD, overrides=overrides)
    t = p.to_dict()["time"]
    return p, t, {ph["name"]: ph for ph in t["phases"]}


def test_pipeline_row_is_superlinear_only_against_the_eager_one_gpu_row():
    one, t1, _ = _time(ONE)
    pp, t2, _ = _time(PP2)
    fused, tf, _ = _time(ONE | FUSED)
    assert t1["tokens_per_step"] == t2["tokens_per_step"] == tf["tokens_per_step"] == 16384
    assert not fused_kernels(one.card) and fused_kernels(pp.card) and fused_kernels(fused.card)
    assert t1["step_seconds"] / t2["step_seconds"] > 2.0  # eager 1 GPU against fused PP 2: 2.45x
    assert 1.0 < tf["step_seconds"] / t2["step_seconds"] < 2.0  # the same stack on both sides: 1.48x


def test_pipeline_stage_does_half_the_fused_model_work():
    """Per stage, the memory-bound seconds are about half the fused one-GPU pass's, not half the eager pass's: the
    superlinear part is the fused kernels' traffic (eager 0.43 s forward, fused 0.18 s, PP stage 0.10 s)."""
    _, _, eager = _time(ONE)
    _, _, fused = _time(ONE | FUSED)
    _, _, pp = _time(PP2)
    for name in ("forward", "recompute", "backward"):
        stage = pp[name]["terms"]["memory_bound"]
        assert 0.4 < stage / fused[name]["terms"]["memory_bound"] < 0.65
        assert stage / eager[name]["terms"]["memory_bound"] < 0.3
    assert pp["pipeline_bubble"]["terms"]["idle_micro_steps"] == 1.0


def test_fit_on_one_stack_picks_one_gpu_and_scales_sublinearly():
    """With the fused stack pinned for every row, the doc example's search picks one RTX 4090 and no pipeline: two
    cards run data parallel at under twice one card's speed (0.71 s against 1.35 s)."""
    r = trainfit.fit(CARD, gpus=["rtx4090"], max_gpus=2, prices={"rtx4090": "1.98CNY"}, steps=100,
                     overrides={"parallel.tensor_parallel_impl": "megatron"})
    rows = {row.gpus: row for row in r.rows}
    assert r.best.gpus == 1
    assert rows[2].knobs.get("parallel.pipeline_parallel", 1) == 1
    assert 1.0 < rows[1].step_seconds / rows[2].step_seconds < 2.0
