"""Pipeline point-to-point traffic: once per stage boundary, v times under the interleaved schedule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.compute.model_parallel import model_parallel_comm


def _p2p(*, pp: int, v: int, tokens: float = 4096, hidden: int = 8192, latency_s: float = 30e-6) -> float:
    return model_parallel_comm(
        tokens=tokens, hidden=hidden, q_dim=hidden, kv_dim=1024, layers=2, attention_layers=2, moe_layers=0, top_k=0,
        tp=1, cp=1, ulysses=False, ep=1, pp=pp, recompute=True, latency_s=latency_s, tp_bus_bytes_per_s=1e11,
        cp_bus_bytes_per_s=1e11, ep_bus_bytes_per_s=1e11, pp_bytes_per_s=360e9, virtual_stages=v).pipeline_p2p_s


def test_one_chunk_exact():
    # 4096 x 8192 bf16 = 64 MiB forward and its gradient back, half hidden: 0.5 * 2 * (64 MiB / 360 GB/s + 30 us)
    assert _p2p(pp=4, v=1) == pytest.approx(4096 * 8192 * 2 / 360e9 + 30e-6)


def test_interleaved_moves_v_times_as_much():
    # Narayanan et al. 2021 §2.2: the interleaved schedule's communication grows by v
    assert _p2p(pp=4, v=10) == pytest.approx(10 * _p2p(pp=4, v=1))


def test_no_pipeline_no_traffic():
    assert _p2p(pp=1, v=1) == 0.0


@given(pp=st.integers(2, 16), v=st.integers(1, 12), tokens=st.integers(1, 1 << 17))
def test_linear_in_chunks_and_growing_with_tokens(pp, v, tokens):
    assert _p2p(pp=pp, v=v, tokens=tokens) == pytest.approx(v * _p2p(pp=pp, v=1, tokens=tokens))
    assert _p2p(pp=pp, v=v, tokens=tokens + 1) > _p2p(pp=pp, v=v, tokens=tokens)
