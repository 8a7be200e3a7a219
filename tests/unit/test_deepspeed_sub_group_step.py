"""DeepSpeed ZeRO's optimizer step under context (Ulysses) parallel: the per-rank plan charges the
optimizer one flat fp32 sub-group at a time, as ``trainfit.plan.ranks._zero_step`` says.

The first test runs DeepSpeed itself (the pinned 0.19.8, CPU, gloo, world size 1) with a client torch
AdamW (``torch_adam``, ``foreach: true``) at ZeRO-3 and a small ``sub_group_size``: every
``optimizer.step()`` sees exactly one flat tensor, a whole sub-group, and foreach's ``_foreach_sqrt``
temporary has that tensor's size. The others plan a Llama-3.1-8B card (ZeRO-3, Ulysses 2, 2 GPUs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from deepspeed_tiny_worker import DEEPSPEED_TINY_PROLOGUE

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

_SUB_GROUP = 20_000

_FOREACH = DEEPSPEED_TINY_PROLOGUE.replace('"torch_adam": True}', '"torch_adam": True, "foreach": True}')
_WORKER = _FOREACH + textwrap.dedent(f'''
    m, eng, zo = engine({{"stage": 3, "sub_group_size": {_SUB_GROUP}, "stage3_param_persistence_threshold": 100}})
    rec = {{"steps": [], "sqrt": [], "sub_groups": [sum(p.partition_numel() for p in g) for g in zo.fp16_groups]}}
    real_sqrt = torch._foreach_sqrt
    def sqrt(ts):
        rec["sqrt"].append([t.numel() for t in ts])
        return real_sqrt(ts)
    torch._foreach_sqrt = sqrt
    inner = zo.optimizer.step
    def step(*a, **k):
        rec["steps"].append([p.numel() for g in zo.optimizer.param_groups for p in g["params"]])
        return inner(*a, **k)
    zo.optimizer.step = step
    ids = torch.randint(0, V, (1, 16))
    loss = eng(ids).float().pow(2).mean()
    eng.backward(loss)
    eng.step()
    print("RESULT " + json.dumps(rec))
''')


@pytest.mark.slow  # one DeepSpeed engine in a subprocess: about 30 s on two loaded cores
def test_zero3_steps_a_torch_adamw_one_flat_sub_group_at_a_time():
    pytest.importorskip("deepspeed")
    proc = subprocess.run([sys.executable, "-c", _WORKER, "29581"], check=False, capture_output=True, text=True,
                          timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-4000:]
    rec = json.loads(line[len("RESULT "):])
    assert len(rec["sub_groups"]) > 1
    assert rec["steps"] == [[n] for n in rec["sub_groups"]]  # one flat fp32 tensor per optimizer call
    assert rec["sqrt"] == rec["steps"]  # foreach's temporary: that tensor's size, never the whole partition
    assert min(rec["sub_groups"]) >= _SUB_GROUP  # a sub-group closes once it reaches sub_group_size


def _llama8b_ulysses(**precision: object) -> dict:
    return {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2, "nodes": 1},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True, "context_parallel": 2,
                         "context_parallel_kind": "ulysses"},
            "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 1}, "attention": "flash",
            "precision": {"optimizer": "adamw", **precision}}


def _step(plan) -> dict[str, float]:  # noqa: ANN001
    return next(p for p in plan.phases if p.phase.value == "optimizer_step").components


def test_ulysses_zero3_foreach_temporaries_are_one_sub_group():
    """4.0e9 trained elements per rank (8.03 B over 2), sub-group 1e9 (DeepSpeed's default): foreach's
    temporary and the fp32 gradient are 4 GB each, not the partition's 16 GB."""
    c = _step(make_plan(load_card_dict(_llama8b_ulysses(optimizer_impl="foreach"))))
    assert c["optimizer_temporaries"] == pytest.approx(1e9 * 4)
    assert c["zero_step_buffers"] == pytest.approx(1e9 * 4)
    assert c["gradients"] == pytest.approx(c["weights"])  # the bf16 gradient partition outlives the step


def test_ulysses_zero3_for_loop_and_fused():
    loop = _step(make_plan(load_card_dict(_llama8b_ulysses(optimizer_impl="for_loop"))))
    assert loop["optimizer_temporaries"] == pytest.approx(2 * 1e9 * 4)  # sqrt and the division, one sub-group
    fused = _step(make_plan(load_card_dict(_llama8b_ulysses(optimizer_impl="fused"))))
    assert fused.get("optimizer_temporaries", 0.0) == 0.0


def test_ulysses_zero3_sub_group_size_sizes_the_step():
    card = _llama8b_ulysses(optimizer_impl="foreach")
    card["deepspeed"] = {"sub_group_size": 5e8}
    c = _step(make_plan(load_card_dict(card)))
    assert c["optimizer_temporaries"] == pytest.approx(5e8 * 4)
