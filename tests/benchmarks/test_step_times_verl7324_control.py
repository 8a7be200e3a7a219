"""The same-session control of verl PR #7324's A800 weight-sync rows (a null result, compute/sync.py): each row's
``delta_sharded`` figure passes through the same manager steps as its nccl figure, so nccl minus delta is the full
path alone. These tests pin the figures the notes use to the quotes, and the rates they derive to the catalog's
parameter count: one cross-node rate of 1.3-2.1 GB/s per trainer node covers every dense row, and the 0.6B row
bounds the SGLang apply's cost per tensor below ``S_PER_TENSOR_IPC``."""

from __future__ import annotations

import json
import re

import pytest
from step_times_module import load_step_times

from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.memory.weights import total_params

S = load_step_times("trainfit_bench_step_times_verl7324_control")
ROWS = {e["id"]: e for e in json.loads((S.RL_DATA.parent / "published_rl_times_weight_sync.json").read_text())}
P = "verl7324-weight-sync-qwen3-8b-a800-2p2n-"
BF16_GB = 2 * total_params(from_catalog("Qwen/Qwen3-8B")) / 1e9
FP32_GB = 2 * BF16_GB
GATHER_16_GB = FP32_GB * 15 / 16  # a 16-rank ring over two nodes: 15/16 of the fp32 bytes cross
# row -> (delta s, nccl s, GB crossing the trainer node's boundary on the nccl path alone)
CONTROL = {
    "verl7324-weight-sync-qwen3-8b-a800-1p1n-titan-fsdp2-nccl": (3.00, 11.00, BF16_GB),
    f"{P}titan-fsdp2-nccl": (3.34, 34.26, GATHER_16_GB + BF16_GB),
    f"{P}fsdp-engine-fsdp2-nccl": (2.24, 38.58, GATHER_16_GB + FP32_GB),
    f"{P}fsdp-engine-fsdp1-nccl": (24.86, 65.22, GATHER_16_GB + FP32_GB),
}


def _figures(quote: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+\.\d+) s", quote.split("(header:")[0])]


@pytest.mark.parametrize("row_id", sorted(CONTROL))
def test_control_figures_are_the_quoted_ones_and_the_note_says_so(row_id: str) -> None:
    delta, nccl, _ = CONTROL[row_id]
    e = ROWS[row_id]
    assert _figures(e["quote"])[:2] == [delta, nccl]
    assert e["measured"]["phases_s"]["weight_sync"] == nccl
    assert "Same-session control" in e["note"] and f"{delta:.2f} s" in e["note"]


def test_one_cross_node_rate_covers_every_dense_row() -> None:
    assert BF16_GB == pytest.approx(16.4, abs=0.1)
    rates = {k: gb / (nccl - delta) for k, (delta, nccl, gb) in CONTROL.items()}
    assert all(1.3 < r < 2.1 for r in rates.values()), rates
    # the FSDP1 unshard, paid by both of its figures: its delta minus the FSDP2 engine's delta
    unshard = GATHER_16_GB / (CONTROL[f"{P}fsdp-engine-fsdp1-nccl"][0] - CONTROL[f"{P}fsdp-engine-fsdp2-nccl"][0])
    assert unshard == pytest.approx(1.36, abs=0.02)
    # a 200 Gb/s NIC moves 25 GB/s: the excess is an order of magnitude slower than any RDMA NIC's rate
    assert max(rates.values()) < 25e9 / 1e9 / 10


def test_small_model_row_bounds_the_cost_per_tensor_below_the_ipc_default() -> None:
    e = ROWS["verl7324-weight-sync-qwen3-0p6b-a800-1n-6t2r-titan-fsdp2-nccl"]
    delta, nccl = _figures(e["quote"])[:2]
    assert (delta, nccl) == (0.59, 0.61)
    tensors = sync.hf_tensor_count(from_catalog("Qwen/Qwen3-0.6B"))
    assert tensors == 310
    card, _ = S.map_rl(e)
    kv_release_resume_s = S.plan_card(card).parts["time.sleep_wake"]  # SGLang level 1, inside the sync timer
    assert kv_release_resume_s == pytest.approx(0.125, abs=0.01)
    bound = (nccl - kv_release_resume_s) / tensors
    assert bound == pytest.approx(1.56e-3, abs=0.01e-3)
    assert bound < sync.S_PER_TENSOR_IPC
