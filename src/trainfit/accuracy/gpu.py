"""Plans for the cases measured on a real GPU (``benchmarks/gpu_calibrate.py``), and the overhead fit.

Pure: reads the raw JSON records the device run wrote and plans each case; no torch. The raw files
live in ``benchmarks/results/gpu_raw/``: ``default.json`` (the fit set: the grid the overhead
constants were fitted on) and ``heldout.json`` (measured afterwards, never used to fit).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRAIN_PHASES = ("forward", "backward", "optimizer_step")


@dataclass(frozen=True, slots=True)
class StepPoint:
    """One measured training step beside the plan for the same card (bytes)."""

    label: str
    measured_allocated: float
    measured_reserved: float
    plan_allocated: float
    plan_reserved: float
    plan_rounding: float
    plan_transient: float
    """The step's largest transient the fragmentation term is taken from."""

    @property
    def measured_fragmentation_share(self) -> float:
        """(reserved - allocated - rounding) / transient, as the overhead model defines its share."""
        return (self.measured_reserved - self.measured_allocated - self.plan_rounding) / self.plan_transient


def card_dict(case: dict[str, Any]) -> dict[str, Any]:
    """The run card for a measured case: one GPU, the case's scope, attention, batch and optimizer; a case run
    with transformers' per-expert loop (``experts: eager``, ``set_experts_implementation``) as
    ``parallel.moe_experts: loop_v5`` (transformers 5.24.0 ran them: v5's eager experts, ``compute.expert_loop``).
    ``precision.autocast`` false: the harness runs the bf16 model as built, with no autocast around its forward
    (benchmarks/gpu_calibrate.py ``measure_case``: ``model(input_ids=ids, labels=ids)`` and ``per_token_logps``
    bare), so PEFT's fp32 adapters ran their products in fp32 (``compute.inventory.Adapter.adapter_dtype_bytes``)."""
    model: Any = case["model"]
    if "/" not in model:  # a custom config of the grid: inline
        model = {"id": model, "config": case["config"]}
    parallel: dict[str, Any] = {"strategy": "single", "gradient_checkpointing": case["ckpt"]}
    if case.get("experts") == "eager":
        parallel["moe_experts"] = "loop_v5"
    return {"model": model, "scope": case["scope"], "attention": case["attention"],
            "hardware": {"gpu": "h200", "gpus_per_node": 1}, "parallel": parallel,
            "batch": {"micro_batch_size": case["micro_batch_size"], "seq_len": case["seq_len"]},
            "precision": {"optimizer_impl": case["optimizer_impl"], "autocast": False}}


def label(case: dict[str, Any]) -> str:
    return (f"{case['model']} {case['scope']} {case['attention']}{' ckpt' if case['ckpt'] else ''} "
            f"b{case['micro_batch_size']}x{case['seq_len']} {case['optimizer_impl']}"
            f"{' experts loop' if case.get('experts') == 'eager' else ''}")


def step_points(raw: dict[str, Any]) -> list[StepPoint]:
    """Training-step cases of one raw record that measured every phase (planned with the record's
    allocator: ``expandable_segments`` when its ``alloc_conf`` sets it). The record's cases ran in one
    process: each after the first is replayed after the first case's step (its cuBLAS workspaces stay,
    ``trainfit.memory.alloc_sequence.after_case``)."""
    from trainfit.memory.alloc_sequence import after_case, recording
    from trainfit.memory.overhead import FRAGMENTATION_OF_TRANSIENTS
    from trainfit.plan import make_plan
    from trainfit.plan.overheads import fitted_reserved
    from trainfit.spec.card import load_card_dict

    out = []
    prior = None  # the record's cases ran one after another in one process (alloc_sequence.after_case)
    for case in raw["cases"]:
        m = case.get("measured")
        if not m or case["pass_kind"] != "train_step" or not all(p in m["phases"] for p in TRAIN_PHASES):
            continue
        card = card_dict(case)
        if "expandable_segments:True" in str((raw.get("versions") or {}).get("alloc_conf") or ""):
            card["hardware"]["allocator"] = "expandable_segments"
        with recording() as made, after_case(prior, warmup_keeps_output=True):
            plan = make_plan(load_card_dict(card))
        prior = prior or (made[-1] if made else None)
        phases = {p.phase.value: p for p in plan.phases}
        with fitted_reserved():  # the share's terms (a replayed plan has no share in it)
            fitted = {p.phase.value: p for p in make_plan(load_card_dict(card)).phases}
        peak = max((fitted[p] for p in TRAIN_PHASES), key=lambda r: r.allocated)
        out.append(StepPoint(
            label=label(case),
            measured_allocated=max(m["phases"][p]["allocated"] for p in TRAIN_PHASES),
            measured_reserved=max(m["phases"][p]["reserved"] for p in TRAIN_PHASES),
            plan_allocated=peak.allocated, plan_reserved=max(phases[p].reserved for p in TRAIN_PHASES),
            plan_rounding=peak.overhead.rounding,
            plan_transient=peak.overhead.fragmentation / FRAGMENTATION_OF_TRANSIENTS,
        ))
    return out


def fit_fragmentation_share(points: list[StepPoint]) -> float:
    """The median measured share: robust to the few cases an allocator pattern dominates."""
    return statistics.median(p.measured_fragmentation_share for p in points)


def load_raw(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
