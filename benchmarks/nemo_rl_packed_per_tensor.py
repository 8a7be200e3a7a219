"""The host cost per tensor of NeMo RL's packed NCCL broadcast (``compute.sync.S_PER_TENSOR_NEMO_RL_PACKED``), read
from a pair of published refits that differ in tensor count.

NeMo RL's NCCL reshard refit PR (NVIDIA-NeMo/RL pull request #2971, https://github.com/NVIDIA-NeMo/RL/pull/2971,
description of 2026-06-27, "DGX-H100 - xferdtensor_python_impl") times Qwen3-30B-A3B, Megatron EP8 x PP2 -> vLLM
TP2 x DP8 on H100 (16 + 16 GPUs), in bf16 (1.21-1.52 s) and with blockwise fp8 (3.20-4.30 s). The fp8 refit sends
one ``*_scale_inv`` per fp8 weight on the packed (misc) path, 18,624 more tensors, and half the bulk bytes. Every
other term of ``nccl_reshard_seconds`` is the same function of both, so the cost per tensor ``s`` at which the model's
``T_fp8(s) - T_bf16(s)`` equals the published difference is the path's cost per tensor. Neither refit is a scored row
of ``benchmarks/step_times.py``, but the pair is a near-twin of the scored fp8 reshard row (EP8 x DP2 -> TP2 x DP8:
same table, model, vLLM layout and tensor counts), so that row's agreement is weak held-out evidence; the PR's other
30B rows are printed beside the model as a check.

    .venv/bin/python benchmarks/nemo_rl_packed_per_tensor.py

Pure Python, no torch; prints only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from trainfit.catalog.gpus import resolve_gpu  # noqa: E402
from trainfit.catalog.models import from_catalog  # noqa: E402
from trainfit.compute import sync  # noqa: E402
from trainfit.compute.rates import default_rates  # noqa: E402
from trainfit.plan.rl_common import bf16_engine_weight_bytes  # noqa: E402
from trainfit.rollout.quantization import FP8_CAST_BYTES_PER_PARAM, engine_weight_bytes  # noqa: E402
from trainfit.spec.enums import RolloutQuantization  # noqa: E402

MODEL = "Qwen/Qwen3-30B-A3B"
PAIR = {"bf16": (1.21, 1.52), "fp8": (3.20, 4.30)}
"""EP8 x PP2 -> TP2 x DP8, seconds per refit (PR #2971's table)."""
NIC_BYTES_PER_S = 400e9 / 8
"""The PR states no fabric: an H100 card's default NIC, 400 Gb/s per GPU (``plan.time.nic_bytes_per_s``), as the
benchmark plans these rows."""
OTHER_ROWS = [  # (train tp, pp, ep, vLLM tp, fp8, published low, high): the PR's other 30B rows, 16 + 16 GPUs
    (2, 1, 4, 4, False, 1.13, 1.53), (2, 2, 4, 4, False, 0.74, 1.17), (1, 2, 8, 8, False, 0.74, 1.00),
    (2, 2, 4, 2, True, 3.19, 4.04), (1, 1, 8, 2, True, 2.90, 4.00)]


def refit_seconds(*, tp: int, pp: int, ep: int, gen_tp: int, fp8: bool, s_per_tensor: float) -> float:
    """``nccl_reshard_seconds`` for the PR's 16 training and 16 vLLM H100s, two nodes each side, as the plan calls it
    (``plan.rl_sync._transport_sync_phase``)."""
    spec = from_catalog(MODEL)
    weights = (engine_weight_bytes(spec, quantization=RolloutQuantization.FP8) if fp8
               else bf16_engine_weight_bytes(spec))
    return sync.nccl_reshard_seconds(
        spec=spec, weight_bytes=weights, train_tp=tp, train_pp=pp, train_ep=ep, train_etp=1, train_world=16,
        gen_tp=gen_tp, gen_engines=16 // gen_tp, rates=default_rates(resolve_gpu("h100-sxm")), gpus_per_node=8,
        inter_node=True, nic_bytes_per_s=NIC_BYTES_PER_S, sender_node_ranks=8, fp8=fp8,
        fp8_cast_bytes_per_param=FP8_CAST_BYTES_PER_PARAM, misc_s_per_tensor=s_per_tensor).total_s


def pair_difference(s_per_tensor: float) -> float:
    """The model's fp8 refit minus its bf16 refit of the pair's layout, seconds."""
    return (refit_seconds(tp=1, pp=2, ep=8, gen_tp=2, fp8=True, s_per_tensor=s_per_tensor)
            - refit_seconds(tp=1, pp=2, ep=8, gen_tp=2, fp8=False, s_per_tensor=s_per_tensor))


def solve(difference_s: float) -> float:
    """The cost per tensor at which the model's pair differs by ``difference_s`` (bisection; the difference grows
    with the cost per tensor)."""
    lo, hi = 0.0, 2e-3
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pair_difference(mid) < difference_s else (lo, mid)
    return (lo + hi) / 2


def main() -> int:
    a = pair_difference(0.0)
    print(f"model fp8 - bf16: {a:+.3f} s with no cost per tensor, {pair_difference(0.3e-3):+.3f} s at 0.3 ms")
    mid = sum(PAIR["fp8"]) / 2 - sum(PAIR["bf16"]) / 2
    low, high = PAIR["fp8"][0] - PAIR["bf16"][1], PAIR["fp8"][1] - PAIR["bf16"][0]
    for name, d in (("midpoints", mid), ("smallest", low), ("largest", high)):
        print(f"published difference, {name}: {d:.3f} s -> {solve(d) * 1e3:.3f} ms per tensor")
    s = sync.S_PER_TENSOR_NEMO_RL_PACKED
    print(f"\nthe PR's 30B rows at {s * 1e3:.3f} ms per tensor:")
    for tp, pp, ep, gen_tp, fp8, lo, hi in [(1, 2, 8, 2, False, *PAIR["bf16"]), (1, 2, 8, 2, True, *PAIR["fp8"]),
                                            *OTHER_ROWS]:
        t = refit_seconds(tp=tp, pp=pp, ep=ep, gen_tp=gen_tp, fp8=fp8, s_per_tensor=s)
        print(f"  EP{ep} TP{tp} PP{pp} -> TP{gen_tp} {'fp8 ' if fp8 else 'bf16'}  published {lo:.2f}-{hi:.2f} s"
              f"  model {t:.2f} s ({100 * (t / ((lo + hi) / 2) - 1):+.0f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
