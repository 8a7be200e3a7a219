"""Check (not a model change): the Ultra-Scale Playbook's own collective measurement taken as the card's network.

The playbook measured its cluster's collectives across node counts (8 H100 a node, EFA between nodes; figure
"Communication Bandwidth by Number of Nodes (size=256MB)", a copy of the playbook's matplotlib SVG of 2025-02-13 in
ai-twinkle/ultrascale-playbook-zh-tw webapp/assets/images/pp_comm_bandwidth.svg
@c693694e7ab6388977ef060bba0ca896afcbf08c, medians read from the line coordinates). For each node count this script
finds the per-GPU NIC rate at which trainfit's NCCL model (``collectives.nccl_collective_seconds`` over
``ring_bus_bytes_per_s`` of 8 local ranks) times the measured 256 MB AllReduce, then re-plans the 26 cells of
huggingface/nanotron docs/benchmark_summary.svg (``published_train_times_nanotron_ultrascale.json``) with that rate as
``inter_node_gbps_per_gpu``, and prints each cell's error before and after. The result is recorded in the 1.34B x
64-node entry's ``checked`` text: the mapping is refuted (median 9.4 % -> 17.9 %, worst -63 % -> +272 %), so the data
keep the card's default NIC.

``--per-job``: the same with each cell's own measurement instead, the sweep CSV's 'AllReduce (GB/s)' of its job
(``measured.also.all_reduce_bus_gb_per_s_logged``): nanotron's ``measure_bandwidth`` all-reduces one 1 GiB fp32 tensor
over the whole world group 10 times before training and reports bus bandwidth (huggingface/nanotron
src/nanotron/trainer.py l.1083-1242 @6ac7d73369c1069e9887bd74cd4abc60aaabf06c). Also refuted (median 5.3 % -> 7.3 %,
worst 63 % -> 164 %), recorded in the same ``checked`` text.

Run: ``PYTHONPATH=src python benchmarks/ultrascale_network_check.py [--per-job]``.
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


def main(per_job: bool = False) -> None:
    spec = importlib.util.spec_from_file_location("step_times", HERE / "step_times.py")
    st = importlib.util.module_from_spec(spec)
    sys.modules["step_times"] = st
    spec.loader.exec_module(st)
    nic = {n: fitted_nic_gbps(n, b) for n, b in ALL_REDUCE_BUS_GB_PER_S.items()}
    print("fitted NIC Gb/s per GPU by nodes:", {n: (round(v, 1) if v else "default") for n, v in nic.items()})
    before, after = [], []
    for e in st.load_entries(st.TRAIN_DATA):
        if not e["id"].startswith("ups-"):
            continue
        published = e["measured"]["value"]
        b = st.plan_card(st.map_train(e)[0]).step_s / published - 1
        e2 = copy.deepcopy(e)
        rate = nic.get(e["nodes"])
        if per_job:
            rate = fitted_nic_gbps(e["nodes"], e["measured"]["also"]["all_reduce_bus_gb_per_s_logged"],
                                   JOB_MESSAGE_BYTES) if e["nodes"] > 1 else None
        if rate:
            e2["inter_node_gbps_per_gpu"] = round(rate, 1)
        a = st.plan_card(st.map_train(e2)[0]).step_s / published - 1
        before.append(abs(b))
        after.append(abs(a))
        print(f"{e['id']:40s} {b:+7.1%} -> {a:+7.1%}")
    print(f"median |error| {statistics.median(before):.1%} -> {statistics.median(after):.1%}; "
          f"worst {max(before):.1%} -> {max(after):.1%}")


if __name__ == "__main__":
    main(per_job="--per-job" in sys.argv[1:])
