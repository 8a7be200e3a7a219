"""Score trainfit's inter-node collective model against published NCCL bus bandwidths.

Input: ``benchmarks/data/nccl_collective_bandwidths.json`` (each entry cited). For every measurement the script runs the
chain a plan runs for a collective group that spans nodes: ``collectives.ring_bus_bytes_per_s`` (the intra-node bus,
or the NICs of the group's GPUs in one node times ``NIC_EFFICIENCY``), then ``collectives.nccl_collective_seconds``
(NCCL's tuner: cheapest of ring / tree x LL / LL128 / Simple, ``tuning.cc`` latencies plus the measured network-step
excess), and turns the modelled seconds into nccl-tests' bus bandwidth (``doc/PERFORMANCE.md``: all-reduce
``2(n-1)/n``, all-gather / reduce-scatter ``(n-1)/n`` of the algorithm bandwidth). Error = modelled seconds /
published seconds - 1 (= published busbw / modelled busbw - 1; positive: the model is slower), the step-time
benchmark's sign.

It also scores the per-NIC peaks NCCL's maintainers state (``per_nic_statements``) against the model's per-NIC rate
(``NIC_EFFICIENCY`` x line rate), and prints, for the measurements whose NICs' line rate is under the intra-node bus
(GPUs a node x NIC rate a GPU < ``rates.intra_node_bus_bytes_per_s``, whatever ``NIC_EFFICIENCY`` is), the efficiency
each implies (published busbw / (GPUs a node x NIC rate a GPU)), split by
``int(sha1(id).hexdigest(), 16) % 2`` (half 0 / half 1).

Groups: ``ring``: groups past 2 nodes; ``2n-tree``:
an all-reduce on 2 nodes at NCCL's default algorithm (its tree sends each byte across the node boundary once,
which the model does not price: see the data file's description); ``nvls``: NVLink SHARP on (not modelled);
``ultrascale``: the Ultra-Scale Playbook cluster's 256 MB figure, kept apart (it falls with the node count far
faster than any NIC bound).

Run: ``PYTHONPATH=src python benchmarks/collectives_vs_published.py``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "nccl_collective_bandwidths.json"

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}
"""nccl-tests ``doc/PERFORMANCE.md``: bus bandwidth / algorithm bandwidth for ``n`` ranks."""


def half(entry_id: str) -> int:
    """The benchmark's fit / held-out split: 0 or 1."""
    return int(hashlib.sha1(entry_id.encode()).hexdigest(), 16) % 2


def nic_bytes_per_s_per_gpu(m: dict) -> float:
    """The NIC rate one GPU gets: the node's NICs shared by its GPUs (bytes per second, one direction)."""
    return m["nics_per_node"] * m["nic_gbps"] * 1e9 / 8 / m["gpus_per_node"]


def group(m: dict) -> str:
    if m.get("nvls"):
        return "nvls"
    if m["id"].startswith("ultrascale-"):
        return "ultrascale"
    if m.get("two_node_tree"):
        return "2n-tree"
    return "ring"


@dataclass(frozen=True)
class Scored:
    id: str
    group: str
    half: int
    published_gb_per_s: float
    model_gb_per_s: float
    network_bound: bool
    implied_efficiency: float | None

    @property
    def error(self) -> float:
        return self.published_gb_per_s / self.model_gb_per_s - 1


def score_measurement(m: dict) -> Scored:
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute import collectives as coll
    from trainfit.compute.rates import default_rates

    rates = default_rates(resolve_gpu(m["gpu"]))
    nodes, local = m["nodes"], m["gpus_per_node"]
    ranks = nodes * local
    nic = nic_bytes_per_s_per_gpu(m)
    bus = coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=nodes > 1, nic_bytes_per_s=nic, local_ranks=local)
    seconds = coll.nccl_collective_seconds(collective=m["collective"], total_bytes=m["size_bytes"], ranks=ranks,
                                           nodes=nodes, bus_bytes_per_s=bus,
                                           intra_link=coll.IntraLink.of(nvlink=rates.nvlink))
    model = BUS_FACTOR[m["collective"]](ranks) * m["size_bytes"] / seconds / 1e9
    network_bound = local * nic < rates.intra_node_bus_bytes_per_s  # the NICs' line rate under NVLink's bus
    implied = m["busbw_gb_per_s"] * 1e9 / (local * nic) if network_bound else None
    return Scored(m["id"], group(m), half(m["id"]), m["busbw_gb_per_s"], model, network_bound, implied)


def score_statement(s: dict) -> Scored:
    from trainfit.compute import collectives as coll

    model = s["nic_gbps"] / 8 * coll.NIC_EFFICIENCY
    return Scored(s["id"], "per-nic", half(s["id"]), s["per_nic_gb_per_s"], model, True,
                  s["per_nic_gb_per_s"] / (s["nic_gbps"] / 8))


def load(path: Path = DATA) -> tuple[list[dict], list[dict]]:
    data = json.loads(path.read_text())
    return data["measurements"], data["per_nic_statements"]


def score_all(path: Path = DATA) -> list[Scored]:
    measurements, statements = load(path)
    return [score_measurement(m) for m in measurements] + [score_statement(s) for s in statements]


def summary(rows: list[Scored]) -> dict[str, tuple[int, float, float]]:
    """Per group (and half): (count, median |error|, worst error by magnitude)."""
    out: dict[str, tuple[int, float, float]] = {}
    keys = sorted({r.group for r in rows})
    for key in keys + [f"{k} half {h}" for k in keys for h in (0, 1)]:
        name, _, h = key.partition(" half ")
        sel = [r for r in rows if r.group == name and (not h or r.half == int(h))]
        if sel:
            errs = [r.error for r in sel]
            out[key] = (len(sel), statistics.median(abs(e) for e in errs), max(errs, key=abs))
    return out


def main() -> None:
    from trainfit.compute import collectives as coll

    rows = score_all()
    print(f"NIC_EFFICIENCY = {coll.NIC_EFFICIENCY}")
    print()
    print("| id | group | half | published busbw GB/s | model busbw GB/s | error | network-bound | implied eff |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        eff = f"{r.implied_efficiency:.3f}" if r.implied_efficiency is not None else ""
        print(f"| {r.id} | {r.group} | {r.half} | {r.published_gb_per_s:.1f} | {r.model_gb_per_s:.1f} | "
              f"{r.error:+.1%} | {'yes' if r.network_bound else 'no'} | {eff} |")
    print()
    print("| subset | n | median abs error | worst |")
    print("|---|---|---|---|")
    for key, (n, med, worst) in summary(rows).items():
        print(f"| {key} | {n} | {med:.1%} | {worst:+.1%} |")
    print()
    for h in (0, 1):
        effs = [r.implied_efficiency for r in rows
                if r.half == h and r.group in ("ring", "per-nic") and r.implied_efficiency is not None]
        if effs:
            print(f"implied NIC efficiency, ring-bound measurements and per-NIC statements, half {h}: "
                  f"n={len(effs)} median {statistics.median(effs):.3f} "
                  f"(min {min(effs):.3f}, max {max(effs):.3f})")


if __name__ == "__main__":
    sys.exit(main())
