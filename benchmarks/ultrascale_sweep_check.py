"""Check (not a model change): every job of the Ultra-Scale Playbook sweep, not only the fastest job of each cell.

The 26 ``ups-*`` entries of ``published_train_times_nanotron_ultrascale.json`` are the fastest job of each (model, node
count) cell. Their source, the sweep's CSV (huggingface/nanotron benchmark/results/bench_final2_mfu2.csv, read from the
copy github.com/eyao600/Rapid-LLM validation_scripts/huggingface_data/bench_final2_mfu2.csv
@9a8d0a10efdf9cf67e5d966bdbb2a2861279feb4, 4,104 jobs, not committed here: pass its path), also holds every other
layout the sweep ran. This script re-plans each successful job of the four benchmark shapes (1.34B, 3.57B, 8.86B, 80B at
sequence 4096, vocabulary 131072; the ``_gqa8`` variants with 8 KV heads) on the card of the scored entry of the same
shape with the job's nodes, dp/tp/pp, micro-batch, accumulation and ZeRO stage (``step_times.map_train``), and prints
the time error (planned / published step - 1; published step = global batch x 4096 / (tok/s/GPU x GPUs)) grouped
three ways:

* ``80b``: the 80B jobs by tensor-parallel size, 4-32 nodes (the 64-node ones are in the third group's fabric split);
* ``tp8``: the 3.57B and 8.86B jobs without a pipeline, 1-32 nodes, by TP size (2, 4, 8) and micro-batch size;
* ``fabric``: the 64-node jobs of the three smaller shapes by the world all-reduce bus bandwidth their job logged before
  training (the CSV's 'AllReduce (GB/s)', nanotron's ``measure_bandwidth``; huggingface/nanotron src/nanotron/trainer.py
  l.1083-1242 @6ac7d73369c1069e9887bd74cd4abc60aaabf06c), below or above 40 GB/s;
* ``nic``: every job at 2-64 nodes planned on the card's default NIC and on the network the scored entries state
  (``inter_node_gbps_per_gpu``, ``ultrascale_network_check.py --cluster``), median |error| by node count;
* ``floor``: no plan, only the published time: milliseconds per decoder layer and micro-batch slot
  (``layer_slot_ms``) of the micro-batch-1 jobs at 1-32 nodes, medians by the CSV's ``after_pp_fix`` flag (the
  sweep's batch of runs), one node or several, TP size, where the pipeline's sends run (``pipeline_kind``: no
  pipeline, a pipeline inside one node, a pipeline whose stages sit in different nodes) and shape.

The numbers are recorded in the ``checked`` text of the 80B x 4-node and 1.34B x 64-node entries.

Run: ``PYTHONPATH=src python benchmarks/ultrascale_sweep_check.py bench_final2_mfu2.csv [80b|tp8|fabric|floor|nic]``.
"""

from __future__ import annotations

import copy
import csv
import importlib.util
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

JOB_NAME = re.compile(r"(1\.34G|3\.57G|8\.86G|80G)_dp(\d+)_tp(\d+)_pp(\d+)_acc(\d+)_mbs(\d+)_seq4096_zero(\d)"
                      r"_tpmodeRED_vocab131k(_gqa8)?$")
"""The sweep's job name (scripts/scaling_benchmarks.py create_config's run name)."""

SHAPE_ENTRY = {"1.34G": "ups-h100-1p34b-16n-dp64tp2pp1-z0", "3.57G": "ups-h100-3p57b-16n-dp32tp4pp1-z0",
               "8.86G": "ups-h100-8p86b-16n-dp16tp8pp1-z0", "80G": "ups-h100-80b-4n-dp1tp8pp4-z0"}
"""The scored entry whose card (model shape, precision, nanotron fields) each job of that shape is planned on."""


def step_times():  # noqa: ANN201 - the benchmark module
    spec = importlib.util.spec_from_file_location("step_times", HERE / "step_times.py")
    st = importlib.util.module_from_spec(spec)
    sys.modules["step_times"] = st
    spec.loader.exec_module(st)
    return st


def job_error(st, entries: dict, row: dict, default_nic: bool = False) -> tuple[dict, float] | None:  # noqa: ANN001
    """(the job's fields, planned / published step - 1) for one CSV row; None when the row is not a benchmark shape.
    ``default_nic``: plan it on the card's default NIC instead of the entry's ``inter_node_gbps_per_gpu``."""
    m = JOB_NAME.match(row["name"])
    if not m or row["status"] != "Success" or not row["tok/s/gpu"]:
        return None
    size, dp, tp, pp, acc, mbs, zero, gqa = m.groups()
    dp, tp, pp, acc, mbs, zero = map(int, (dp, tp, pp, acc, mbs, zero))
    nodes = int(float(row["nodes"]))
    e = copy.deepcopy(entries[SHAPE_ENTRY[size]])
    e.update(id=f"job-{row['job_id']}", nodes=nodes, gpus=8 * nodes)
    if default_nic:
        e["inter_node_gbps_per_gpu"] = None
    e["parallel"].update(tp=tp, pp=pp, strategy="zero1" if zero == 1 else "ddp")
    e["batch"].update(micro_batch_size=mbs, grad_accum=acc, global_batch_size=dp * mbs * acc)
    if gqa:
        e["model_config"]["num_key_value_heads"] = 8
    try:
        planned = st.plan_card(st.map_train(e)[0])
    except (st.Unmapped, ValueError):  # a layout the card or planner refuses (e.g. a pipeline rank with no layers)
        return None
    published_s = planned.tokens_per_step / (float(row["tok/s/gpu"]) * 8 * nodes)
    job = dict(size=size, nodes=nodes, dp=dp, tp=tp, pp=pp, mbs=mbs, zero=zero,
               all_reduce=float(row["AllReduce (GB/s)"] or 0), name=row["name"])
    return job, planned.step_s / published_s - 1


def pipeline_kind(*, dp: int, tp: int, pp: int) -> str:
    """Where a job's pipeline sends run. Ranks are laid out (pp, dp, tp) with tensor-parallel ranks innermost
    (huggingface/nanotron src/nanotron/parallel/context.py l.69-80 @c252843039cc167ff8d6894b87172af4637eb14b), 8 GPUs a
    node, so a stage holds dp x tp consecutive ranks and a rank sends to the rank dp x tp further on: 'none' without a
    pipeline, 'node' when every stage pair shares a node, 'nodes' when a stage fills whole nodes (every send crosses),
    'mixed' otherwise."""
    if pp <= 1:
        return "none"
    stage = dp * tp
    if stage * pp <= 8:
        return "node"
    return "nodes" if stage % 8 == 0 else "mixed"


def layer_slot_ms(*, step_s: float, grad_accum: int, pp: int, layers: int) -> float:
    """Published milliseconds per decoder layer and micro-batch slot: the step over the 1F1B schedule's
    ``grad_accum + pp - 1`` micro-batch slots and the ``ceil(layers / pp)`` layers of the fullest stage (nanotron's
    cost-balanced split may put one more or fewer there: src/nanotron/models/base.py build_model l.216-236 @c252843039cc;
    the embedding and the head are not split off, so this overstates a layer of a small model slightly)."""
    return step_s / (grad_accum + pp - 1) / -(-layers // pp) * 1e3


def summary(label: str, errors: list[float]) -> str:
    if not errors:
        return f"{label}: none"
    return (f"{label}: n={len(errors)} median {statistics.median(errors):+.0%} "
            f"(min {min(errors):+.0%}, max {max(errors):+.0%})")


def main(path: str, groups: tuple[str, ...]) -> None:
    st = step_times()
    entries = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    jobs = [j for j in (job_error(st, entries, r) for r in rows
                        if JOB_NAME.match(r["name"]) and r["status"] == "Success") if j]
    if "80b" in groups:
        for tp in (4, 8, 16, 32):
            sel = [err for j, err in jobs if j["size"] == "80G" and j["tp"] == tp and j["nodes"] <= 32]
            print(summary(f"80B, TP {tp}, 4-32 nodes", sel))
    if "tp8" in groups:
        for tp in (2, 4, 8):
            for mbs in (1, 2, 4, 8, 16):
                sel = [err for j, err in jobs if j["size"] in ("3.57G", "8.86G") and j["tp"] == tp and j["pp"] == 1
                       and j["mbs"] == mbs and j["nodes"] <= 32]
                print(summary(f"3.57B / 8.86B, TP {tp}, PP 1, micro-batch {mbs}, 1-32 nodes", sel))
    if "floor" in groups:
        floor_groups(rows)
    if "nic" in groups:
        for nodes in (2, 4, 8, 16, 32, 64):
            rows_n = [r for r in rows if JOB_NAME.match(r["name"]) and r["status"] == "Success"
                      and r["nodes"] and int(float(r["nodes"])) == nodes]
            pairs = [(j, d) for j, d in ((job_error(st, entries, r), job_error(st, entries, r, default_nic=True))
                                         for r in rows_n) if j and d]
            print(summary(f"{nodes} nodes, default NIC, |error|", [abs(d[1]) for _, d in pairs]))
            print(summary(f"{nodes} nodes, entries' NIC, |error|", [abs(j[1]) for j, _ in pairs]))
    if "fabric" in groups:
        small = [(j, err) for j, err in jobs if j["size"] != "80G" and j["nodes"] == 64]
        print(summary("64 nodes, logged all-reduce < 40 GB/s", [e for j, e in small if j["all_reduce"] < 40]))
        print(summary("64 nodes, logged all-reduce >= 40 GB/s", [e for j, e in small if j["all_reduce"] >= 40]))


LAYERS = {"1.34G": 16, "3.57G": 28, "8.86G": 32, "80G": 80}
"""Decoder layers of each benchmark shape (scripts/scaling_benchmarks.py model_configs, see the entries' note)."""


def floor_groups(rows: list[dict]) -> None:
    """Print the ``floor`` group (module docstring): medians of ``layer_slot_ms`` at micro-batch 1, 1-32 nodes."""
    cells: dict[tuple[str, str, int, str, str], list[float]] = {}
    for row in rows:
        m = JOB_NAME.match(row["name"])
        if not m or row["status"] != "Success" or not row["tok/s/gpu"]:
            continue
        size, dp, tp, pp, acc, mbs = m.group(1), *map(int, m.groups()[1:6])
        nodes = int(float(row["nodes"]))
        if mbs != 1 or nodes > 32:
            continue
        step_s = dp * acc * 4096 / (float(row["tok/s/gpu"]) * 8 * nodes)
        key = (row.get("after_pp_fix", ""), "1 node" if nodes == 1 else "nodes", tp,
               pipeline_kind(dp=dp, tp=tp, pp=pp), size)
        cells.setdefault(key, []).append(layer_slot_ms(step_s=step_s, grad_accum=acc, pp=pp, layers=LAYERS[size]))
    for (fix, span, tp, kind, size), ms in sorted(cells.items(), key=lambda kv: (*kv[0][:4], LAYERS[kv[0][4]])):
        print(f"micro-batch 1, after_pp_fix {fix:5s} {span:6s} TP {tp:2d} pipeline {kind:5s} {size:5s}: n={len(ms):2d} "
              f"median {statistics.median(ms):6.1f} ms a layer and slot (min {min(ms):.1f}, max {max(ms):.1f})")


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        raise SystemExit("usage: ultrascale_sweep_check.py bench_final2_mfu2.csv [80b|tp8|fabric|floor|nic ...]")
    main(args[0], tuple(args[1:]) or ("80b", "tp8", "fabric", "floor"))
