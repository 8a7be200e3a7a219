"""The Ultra-Scale Playbook cluster's network: two refuted mappings and the rate its entries state (``--cluster``).

The playbook measured its cluster's collectives across node counts (8 H100 a node, EFA between nodes; figure
"Communication Bandwidth by Number of Nodes (size=256MB)", a copy of the playbook's matplotlib SVG of 2025-02-13 in
ai-twinkle/ultrascale-playbook-zh-tw webapp/assets/images/pp_comm_bandwidth.svg
@c693694e7ab6388977ef060bba0ca896afcbf08c, medians read from the line coordinates). For each node count this script
finds the per-GPU NIC rate at which trainfit's NCCL model (``collectives.nccl_collective_seconds`` over
``ring_bus_bytes_per_s`` of 8 local ranks) times the measured 256 MB AllReduce, then re-plans the 26 cells of
huggingface/nanotron docs/benchmark_summary.svg (``published_train_times_nanotron_ultrascale.json``) with that rate as
``inter_node_gbps_per_gpu``, and prints each cell's error before and after. The result is recorded in the 1.34B x
64-node entry's ``checked`` text: the mapping is refuted (median 9.4 % -> 17.9 %, worst -63 % -> +272 %), so the data
do not take these per-node-count rates. In every mode "before" is the card's default NIC (400 Gb/s a GPU), the
baseline these checks were recorded against, and "after" the mode's rate.

``--per-job``: the same with each cell's own measurement instead, the sweep CSV's 'AllReduce (GB/s)' of its job
(``measured.also.all_reduce_bus_gb_per_s_logged``): nanotron's ``measure_bandwidth`` all-reduces one 1 GiB fp32 tensor
over the whole world group 10 times before training and reports bus bandwidth (huggingface/nanotron
src/nanotron/trainer.py l.1083-1242 @6ac7d73369c1069e9887bd74cd4abc60aaabf06c). Also refuted (median 5.3 % -> 7.3 %,
worst 63 % -> 164 %), recorded in the same ``checked`` text.

``--cluster`` (adopted 2026-12-04): one rate for the whole cluster, from the sweep's own pre-training measurements.
The sweep CSV's 'AllReduce (GB/s)' readings (4,104 jobs, nanotron's ``measure_bandwidth`` above) split at 16, 32 and
64 nodes into two groups with nothing between them: a low group that falls as 1 / nodes (16 nodes 10-58 GB/s, 32
nodes 20-30, 64 nodes 10-14; 294 / 270 / 253 jobs) and a high group that stays flat (16 nodes 134.5-223.6, median
173.24; 32 nodes 166.9-205.7, median 187.52; 64 nodes 161.6-190.4, median 176.04; 122 / 85 / 35 jobs). The scored
cells are each cell's fastest job, and the two of them with a low reading ran faster than it allows: the 1.34B x
64-node cell logged 13.38 GB/s, and at the NIC rate that reading implies (17.5 Gb/s a GPU) trainfit plans its step at
1.17 s (+164 %) against the 0.445 s it ran in; the 80B x 32-node cell (28.27 GB/s) plans +30 % (``--per-job``,
above). So a low reading is not the network a scored step ran on; the high group is taken for it. (Many of the
sweep's slower jobs logged low readings and are planned far too fast even on the default NIC; whether those ran on
the low fabric is not settled here.) The rate is in-sample in part: its value comes from the all-reduce readings
alone, but the choice of the high group over the low one rested on those two scored cells' step-time errors, so the
``ups-*`` table is not an out-of-sample check of the network (``step_times.md`` says so where it calls the tables
out-of-sample checks).
``HEALTHY_ALL_REDUCE_BUS_GB_PER_S`` holds its three medians and ``cluster_nic_gbps`` the median of the per-GPU NIC
rates at which trainfit's NCCL model times each (243.6 / 264.7 / 248.9 Gb/s): 248.9 Gb/s, about 0.62 of the card's
default 400 Gb/s, i.e. the cluster's EFA fabric (the Playbook: content/ch03.md l.214 of the translation cited above)
runs a 512-GPU all-reduce at 176 GB/s where trainfit's default InfiniBand-like NIC gives 277. The multi-node
``ups-*`` entries state it as ``inter_node_gbps_per_gpu`` 249 (the 26 cells: median 5.3 -> 4.0 %, worst 63.2 % either
way). Checked on the whole sweep, not only on the 26 fastest jobs (``ultrascale_sweep_check.py nic``: the 1,306
successful multi-node jobs of the four benchmark shapes the card can plan, each on its shape's card): median |error| at
2 / 4 / 8 / 16 / 32 / 64 nodes 12.3 / 46.2 / 59.6 / 52.3 / 71.5 / 89.8 % on the default NIC, 12.0 / 42.8 / 54.0 / 45.0 /
67.4 / 87.7 % on 249 Gb/s; 1,229 jobs closer, 77 further. That is consistent with a fabric slower than the default
NIC, not a confirmation of 249 Gb/s in particular: the sweep's jobs are planned too fast on either rate (most of them
far slower layouts than the scored cells), so any lower rate moves most of them closer; the cluster's rate takes part
of that gap, not all. One flat rate is an
approximation: at 2 nodes the ring all-gather / reduce-scatter readings stand at 0.845 / 0.841 of the same jobs'
one-node readings (after_pp_fix False batch, 70 jobs), about the default NIC's 0.85 in trainfit's model, and at 4 nodes
the all-reduce readings' high group inverts to 209 Gb/s: the shortfall is the fabric's at 4-64 nodes.

Run: ``PYTHONPATH=src python benchmarks/ultrascale_network_check.py [--per-job | --cluster]``.
"""

from __future__ import annotations

import copy
import importlib.util
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

MESSAGE_BYTES = 2**28
ALL_REDUCE_BUS_GB_PER_S = {2: 361.7, 4: 160.1, 8: 99.6, 16: 84.7, 32: 64.9, 64: 32.9}
"""Median AllReduce bus bandwidth by node count (1 node: 436.0, NVLink only), the figure above."""


def fitted_nic_gbps(nodes: int, bus_gb_per_s: float, message_bytes: int = MESSAGE_BYTES) -> float | None:
    """The per-GPU NIC rate (Gb/s) at which trainfit times the measured 256 MB AllReduce over ``nodes`` x 8 GPUs;
    None where the model is slower than the measurement at any NIC rate (the intra-node bus caps it)."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute import collectives as coll
    from trainfit.compute.rates import default_rates

    rates = default_rates(resolve_gpu("h100-sxm"))
    ranks = 8 * nodes
    measured_s = 2 * (ranks - 1) / ranks * message_bytes / (bus_gb_per_s * 1e9)

    def model_s(nic_bytes_per_s: float) -> float:
        bus = coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=True, nic_bytes_per_s=nic_bytes_per_s,
                                        local_ranks=8)
        return coll.nccl_collective_seconds(collective="all_reduce", total_bytes=message_bytes, ranks=ranks,
                                            nodes=nodes, bus_bytes_per_s=bus, intra_link=coll.IntraLink.NVLINK)

    lo, hi = 1e8, 1e12
    if model_s(hi) > measured_s:
        return None
    for _ in range(200):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if model_s(mid) > measured_s else (lo, mid)
    return hi * 8 / 1e9


JOB_MESSAGE_BYTES = 256 * 1024 * 1024 * 4
"""measure_bandwidth's tensor: torch.ones(256 x 1024 x 1024), fp32 (trainer.py l.1099-1103 @6ac7d733)."""


HEALTHY_ALL_REDUCE_BUS_GB_PER_S = {16: 173.24, 32: 187.52, 64: 176.04}
"""Median of the high group of the sweep's logged world all-reduce bus bandwidth (GB/s; 1 GiB fp32 over all GPUs) by
node count, the readings of at least 100 GB/s (the low group's highest: 58.2 / 29.6 / 14.2 GB/s): the sweep CSV
(huggingface/nanotron benchmark/results/bench_final2_mfu2.csv, copy github.com/eyao600/Rapid-LLM
validation_scripts/huggingface_data/bench_final2_mfu2.csv @9a8d0a10efdf9cf67e5d966bdbb2a2861279feb4), 'AllReduce
(GB/s)'."""


def cluster_nic_gbps() -> float:
    """The cluster's per-GPU NIC rate (Gb/s): the median over ``HEALTHY_ALL_REDUCE_BUS_GB_PER_S``'s node counts of
    the rate at which trainfit's NCCL model times that node count's measured 1 GiB world all-reduce (module
    docstring, ``--cluster``)."""
    return statistics.median(fitted_nic_gbps(n, b, JOB_MESSAGE_BYTES)
                             for n, b in HEALTHY_ALL_REDUCE_BUS_GB_PER_S.items())


def _replanned_error(st, e: dict, nic_gbps: float | None) -> float:  # noqa: ANN001 - the benchmark module
    """The entry's step-time error planned with ``nic_gbps`` as its network (None: the card's default NIC)."""
    e2 = copy.deepcopy(e)
    e2["inter_node_gbps_per_gpu"] = nic_gbps
    return st.plan_card(st.map_train(e2)[0]).step_s / e["measured"]["value"] - 1


def main(per_job: bool = False, cluster: bool = False) -> None:
    spec = importlib.util.spec_from_file_location("step_times", HERE / "step_times.py")
    st = importlib.util.module_from_spec(spec)
    sys.modules["step_times"] = st
    spec.loader.exec_module(st)
    nic = {n: fitted_nic_gbps(n, b) for n, b in ALL_REDUCE_BUS_GB_PER_S.items()}
    print("fitted NIC Gb/s per GPU by nodes:", {n: (round(v, 1) if v else "default") for n, v in nic.items()})
    if cluster:
        print(f"cluster NIC Gb/s per GPU: {cluster_nic_gbps():.1f}")
    before, after = [], []
    for e in st.load_entries(st.TRAIN_DATA):
        if not e["id"].startswith("ups-"):
            continue
        b = _replanned_error(st, e, None)
        rate = nic.get(e["nodes"])
        if per_job:
            rate = fitted_nic_gbps(e["nodes"], e["measured"]["also"]["all_reduce_bus_gb_per_s_logged"],
                                   JOB_MESSAGE_BYTES) if e["nodes"] > 1 else None
        if cluster:
            rate = cluster_nic_gbps() if e["nodes"] > 1 else None
        a = _replanned_error(st, e, (round(rate) if cluster else round(rate, 1)) if rate else None)
        before.append(abs(b))
        after.append(abs(a))
        print(f"{e['id']:40s} {b:+7.1%} -> {a:+7.1%}")
    print(f"median |error| {statistics.median(before):.1%} -> {statistics.median(after):.1%}; "
          f"worst {max(before):.1%} -> {max(after):.1%}")


if __name__ == "__main__":
    main(per_job="--per-job" in sys.argv[1:], cluster="--cluster" in sys.argv[1:])
