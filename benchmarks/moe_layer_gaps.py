"""Published minus planned seconds per MoE layer and micro-batch, for every MoE training row of ``step_times.py``.

    PYTHONPATH=src .venv/bin/python benchmarks/moe_layer_gaps.py            # one line per row, worst first
    PYTHONPATH=src .venv/bin/python benchmarks/moe_layer_gaps.py --groups   # medians by GPU and dense / MoE

Each published training entry (SFT full, LoRA / QLoRA, pretraining) whose model has routed experts is mapped and
planned exactly as ``step_times.py`` does (``map_train``, ``hardware_calibration``, ``plan_card``); the line gives
the error, ``(published - planned) / (grad_accum x MoE layers / pipeline stages)`` in ms (the whole step's gap
spread over one rank's MoE-layer passes: a bubble or an optimizer miss is spread too), the tokens one rank routes
per micro-batch (micro-batch x sequence / (tp x cp)), the local experts (E / ep), ep, tp, pp, top-k, the framework,
the card's precision and ``moe_launch``, the GPU and the fit half. ``--groups`` prints the signed median error of
``step_times.json``'s rows (all subsets) by GPU for Megatron-Bridge's dense and MoE rows. The reading is in
``trainfit.compute.moe_time``'s docstring ("MoE rows as a set").

Pure Python, no torch; a few seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import step_times as st  # noqa: E402

from trainfit.catalog.models import from_catalog  # noqa: E402


def _spec(name: str):  # noqa: ANN202 - a ModelSpec or None
    try:
        return from_catalog(name)
    except Exception:  # noqa: BLE001 - an entry the catalog cannot resolve is not an MoE row here
        return None


def gap_rows() -> list[dict]:
    out = []
    for e in st.load_entries(st.TRAIN_DATA):
        spec = _spec(e["model"])
        if spec is None or spec.moe is None:
            continue
        try:
            card, _ = st.map_train(e)
            cal, _ = st.hardware_calibration(e, card["hardware"]["gpu"])
            planned = st.plan_card(card, cal)
        except st.Unmapped:
            continue
        b, hw, par = card["batch"], card["hardware"], card["parallel"]
        tp, pp, cp = (par.get(k, 1) for k in ("tensor_parallel", "pipeline_parallel", "context_parallel"))
        ep = par.get("expert_parallel", 1)
        dp = max(1, hw["gpus_per_node"] * hw["nodes"] // (tp * pp * cp))
        published = st.published_train_seconds(e, float(b["micro_batch_size"] * b["seq_len"] * b["grad_accum"] * dp))
        if not planned.step_s or not published:
            continue
        passes = b["grad_accum"] * spec.num_moe_layers / pp
        out.append(dict(id=e["id"], kind=e["kind"], error=planned.step_s / published - 1,
                        gap_ms=1e3 * (published - planned.step_s) / passes,
                        tokens_per_rank=b["micro_batch_size"] * b["seq_len"] / (tp * cp),
                        local_experts=spec.moe.num_experts // max(1, ep), ep=ep, tp=tp, pp=pp,
                        top_k=spec.moe.experts_per_token, framework=e.get("framework", ""),
                        precision=(card.get("precision") or {}).get("compute", "bf16"),
                        moe_launch=par.get("moe_launch"), gpu=hw["gpu"], half=st.half_of(e["id"])))
    return sorted(out, key=lambda r: r["error"])


def gpu_groups(points: list[dict]) -> dict[tuple[str, str], list[float]]:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p in points:
        if not (p.get("trainfit_s") and p.get("published_s")) or not p["id"].startswith("mbridge"):
            continue
        spec = _spec(p["model"])
        gpu = p["config"].split(",")[0].split("\u00d7 ")[-1]
        groups[(gpu, "moe" if spec is not None and spec.moe is not None else "dense")].append(p["error"])
    return groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", action="store_true")
    args = ap.parse_args()
    if args.groups:
        points = json.loads((HERE / "step_times.json").read_text())["points"]
        for (gpu, kind), errs in sorted(gpu_groups(points).items()):
            print(f"{gpu:10s} {kind:5s} n={len(errs):3d} signed median {100 * statistics.median(errs):+6.1f}%")
        return
    for r in gap_rows():
        print(f"{r['id'][:56]:56s} {r['kind'][:8]:8s} {100 * r['error']:+6.1f}% {r['gap_ms']:+8.2f} ms/layer/mb"
              f"  tok/rank {r['tokens_per_rank']:6.0f} locE {r['local_experts']:3d} ep {r['ep']:3d} tp {r['tp']}"
              f" pp {r['pp']:2d} k {r['top_k']} {r['framework'][:16]:16s} {r['precision']:5s}"
              f" {r['moe_launch'] or '-':5s} {r['gpu']} h{r['half']}")


if __name__ == "__main__":
    main()
