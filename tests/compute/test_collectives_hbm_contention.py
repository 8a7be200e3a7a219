"""The compute that hides the data-parallel collectives runs at the HBM bandwidth they leave it
(``collectives.hbm_contention_exposed``, ``NCCL_HBM_PASSES``, NVIDIA/nccl issue #1428)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives, training
from trainfit.compute.collectives import NCCL_HBM_PASSES, CommTime, hbm_contention_exposed
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

A100_HBM = 2000e9
A100_NVLINK_BUS = 300e9

FSDP_2_NODES = {"model": "Qwen/Qwen3-8B", "scope": "full",
                "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
                "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
                "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 2},
                "attention": "flash"}


def test_the_issue_trace_matches_the_compute_at_the_hbm_left_to_it():
    # A100-SXM4-80GB: 3 x 300 GB/s of 2,000 GB/s taken, a kernel 1 / 0.55 = 1.82 x; measured 1.76 x (GEMM), 1.83 x
    share = NCCL_HBM_PASSES * A100_NVLINK_BUS / A100_HBM
    assert 1.0 / (1.0 - share) == pytest.approx(2.08 / 1.18, rel=0.05)
    assert 1.0 / (1.0 - share) == pytest.approx(0.33 / 0.18, rel=0.05)


def test_a_hidden_collective_adds_its_share_of_hbm_to_the_step():
    out = hbm_contention_exposed(comm=CommTime(0.4, 0.0), compute_s=1.0, bus_bytes_per_s=A100_NVLINK_BUS,
                                 hbm_bytes_per_s=A100_HBM)
    assert out.total_s == 0.4
    assert out.exposed_s == pytest.approx(0.4 * 0.45)


def test_a_collective_bound_span_is_not_slowed():
    # 1 s of collectives beside 0.4 s of compute: the compute gets 0.55 of its rate for 1 s, done inside the span
    comm = CommTime(1.0, 0.6)
    out = hbm_contention_exposed(comm=comm, compute_s=0.4, bus_bytes_per_s=A100_NVLINK_BUS, hbm_bytes_per_s=A100_HBM)
    assert out == comm


def test_the_fluid_bound_caps_a_nearly_collective_bound_step():
    # span max(c, w + c f) = 0.8 + 0.7 x 0.45 = 1.115 s against max(0.7, 0.8): 0.315 s more, less than 0.45 x 0.7
    out = hbm_contention_exposed(comm=CommTime(0.7, 0.0), compute_s=0.8, bus_bytes_per_s=A100_NVLINK_BUS,
                                 hbm_bytes_per_s=A100_HBM)
    assert out.exposed_s == pytest.approx(0.7 * 0.45)
    out = hbm_contention_exposed(comm=CommTime(1.0, 0.2), compute_s=0.8, bus_bytes_per_s=A100_NVLINK_BUS,
                                 hbm_bytes_per_s=A100_HBM)
    assert out.exposed_s == pytest.approx(0.2 + (0.8 - 1.0 * 0.55))


def test_no_bandwidth_taken_no_charge_and_a_saturated_hbm_stops_the_compute():
    comm = CommTime(0.5, 0.1)
    assert hbm_contention_exposed(comm=comm, compute_s=1.0, bus_bytes_per_s=0.0, hbm_bytes_per_s=A100_HBM) == comm
    assert hbm_contention_exposed(comm=comm, compute_s=1.0, bus_bytes_per_s=A100_NVLINK_BUS,
                                  hbm_bytes_per_s=A100_HBM, passes=0.0) == comm
    out = hbm_contention_exposed(comm=comm, compute_s=1.0, bus_bytes_per_s=A100_HBM, hbm_bytes_per_s=A100_HBM)
    assert out.exposed_s == pytest.approx(0.5)  # the hidden 0.4 s run with no compute beside them


def test_a_data_parallel_step_pays_for_the_hbm_its_collectives_take(monkeypatch):
    card = load_card_dict(FSDP_2_NODES)
    training.train_step_time.cache_clear()  # a cached step would not call the collectives again
    with_contention = make_plan(card)
    real = collectives.hbm_contention_exposed_by_group  # the step charges each process group's own rate
    monkeypatch.setattr(collectives, "hbm_contention_exposed_by_group", lambda **kw: real(**{**kw, "passes": 0.0}))
    training.train_step_time.cache_clear()
    without = make_plan(card)
    training.train_step_time.cache_clear()
    assert with_contention.time.parts["communication"] > without.time.parts.get("communication", 0.0)
    assert with_contention.step_seconds > without.step_seconds
