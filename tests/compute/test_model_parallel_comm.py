"""Model-parallel communication per micro-step (``compute.model_parallel``): the pipeline send under sequence
parallel, Megatron's selective (core-attention) recompute, and Transformer Engine's TP communication overlap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.compute.model_parallel import model_parallel_comm
from trainfit.spec.card import RunCard

BASE = dict(tokens=8192.0, hidden=8192, q_dim=8192, kv_dim=1024, layers=20, attention_layers=20, moe_layers=0,
            top_k=0, cp=1, ulysses=False, ep=1, latency_s=30e-6, tp_bus_bytes_per_s=360e9,
            cp_bus_bytes_per_s=360e9, ep_bus_bytes_per_s=360e9, pp_bytes_per_s=40e9)


def test_the_pipeline_send_is_the_sequence_shard_under_sequence_parallel():
    full = model_parallel_comm(**BASE, tp=4, pp=4, recompute=False, virtual_stages=5)
    sp = model_parallel_comm(**BASE, tp=4, pp=4, recompute=False, virtual_stages=5, sequence_parallel=True)
    act = BASE["tokens"] * BASE["hidden"] * 2
    latency = 5 * BASE["latency_s"]  # 0.5 x 2 directions x v chunks
    assert full.pipeline_p2p_s == pytest.approx(5 * act / BASE["pp_bytes_per_s"] + latency)
    assert sp.pipeline_p2p_s == pytest.approx(5 * act / 4 / BASE["pp_bytes_per_s"] + latency)
    assert sp.tensor_s == full.tensor_s  # the TP volume is the same with or without SP (all-gather + reduce-scatter)


def test_core_attention_recompute_repeats_no_tensor_parallel_collective():
    none = model_parallel_comm(**BASE, tp=8, pp=1, recompute=False)
    full = model_parallel_comm(**BASE, tp=8, pp=1, recompute=True)
    selective = model_parallel_comm(**BASE, tp=8, pp=1, recompute=True, recompute_collectives=False)
    assert full.tensor_s == pytest.approx(1.5 * none.tensor_s)  # forward, recompute, backward
    assert selective.tensor_s == pytest.approx(none.tensor_s)


def test_core_attention_recompute_still_repeats_the_ring_exchange():
    ring = dict(BASE, cp=2)
    full = model_parallel_comm(**ring, tp=1, pp=1, recompute=True)
    selective = model_parallel_comm(**ring, tp=1, pp=1, recompute=True, recompute_collectives=False)
    assert selective.context_s == pytest.approx(full.context_s) and full.context_s > 0


def test_overlapped_tp_collectives_hide_behind_the_gemms():
    exposed = model_parallel_comm(**BASE, tp=8, pp=1, recompute=False, sequence_parallel=True)
    one_pass = exposed.tensor_s / 2
    hidden = model_parallel_comm(**BASE, tp=8, pp=1, recompute=False, sequence_parallel=True, tp_comm_overlap=True,
                                 gemm_forward_s=2 * one_pass, gemm_backward_s=4 * one_pass)
    assert hidden.tensor_s == 0.0
    part = model_parallel_comm(**BASE, tp=8, pp=1, recompute=False, sequence_parallel=True, tp_comm_overlap=True,
                               gemm_forward_s=0.25 * one_pass, gemm_backward_s=0.5 * one_pass)
    assert part.tensor_s == pytest.approx(0.75 * one_pass + 0.5 * one_pass)


@given(gemm_f=st.floats(0, 10), gemm_b=st.floats(0, 10), recompute=st.booleans(), coll=st.booleans())
def test_overlap_never_exposes_more_than_no_overlap(gemm_f: float, gemm_b: float, recompute: bool, coll: bool):
    kw = dict(BASE, tp=4, pp=2, recompute=recompute, sequence_parallel=True, recompute_collectives=coll)
    plain = model_parallel_comm(**kw)
    over = model_parallel_comm(**kw, tp_comm_overlap=True, gemm_forward_s=gemm_f, gemm_backward_s=gemm_b)
    assert 0.0 <= over.tensor_s <= plain.tensor_s + 1e-12


def test_the_card_refuses_tp_comm_overlap_without_sequence_parallel():
    with pytest.raises(ValueError, match="parallel.tp_comm_overlap: needs parallel.sequence_parallel"):
        RunCard.model_validate({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                                "parallel": {"strategy": "zero1", "tensor_parallel": 4, "tp_comm_overlap": True}})


def test_a_gb200_training_step_keeps_its_collectives_on_the_nvl72_domain():
    """GB200 NVL72: 4-GPU trays joined by NVLink into one 72-GPU domain; an SFT step's data-parallel ring over 64
    GPUs (16 trays) stays on NVLink (``plan.time.nvlink_gpus_per_node``), as RL's training phases already did."""
    from trainfit.plan import make_plan

    def notes(gpu: str, per_node: int, nodes: int) -> list[str]:
        card = RunCard.model_validate({"model": "meta-llama/Llama-3.1-8B", "parallel": {"strategy": "fsdp"},
                                       "hardware": {"gpu": gpu, "gpus_per_node": per_node, "nodes": nodes},
                                       "batch": {"micro_batch_size": 1, "seq_len": 4096}})
        return [a for a in make_plan(card).time.assumptions if a.startswith("collectives at")]

    assert "(in a node)" in notes("gb200", 4, 16)[0]
    assert "(crossing nodes)" in notes("gb200", 4, 32)[0]  # 128 GPUs: beyond one NVL72 domain
    assert "(crossing nodes)" in notes("h100-sxm", 8, 2)[0]


def test_te_sequence_parallel_backward_hides_the_regather_and_reduce_scatter():
    """Transformer Engine's column-parallel backward without userbuffers: the input re-gather behind the dgrad GEMM,
    the gradient reduce-scatter behind the wgrad GEMM; the row module's output-gradient gather stays exposed."""
    from trainfit.compute.model_parallel import te_sp_backward_pair_s
    assert te_sp_backward_pair_s(gather_s=1.0, reduce_scatter_s=2.0, column_gemm_s=10.0) == 1.0
    assert te_sp_backward_pair_s(gather_s=1.0, reduce_scatter_s=2.0, column_gemm_s=2.0) == pytest.approx(2.0)
    assert te_sp_backward_pair_s(gather_s=1.0, reduce_scatter_s=2.0, column_gemm_s=0.0) == pytest.approx(4.0)
    # LoRA's frozen base: no wgrad GEMM, no re-gather, nothing hides the reduce-scatter
    assert te_sp_backward_pair_s(gather_s=1.0, reduce_scatter_s=2.0, column_gemm_s=10.0, frozen_weights=True) == 3.0


def test_te_sequence_parallel_gathers_the_quantised_width():
    kw = dict(BASE, tp=8, pp=1, recompute=False, sequence_parallel=True, sp_async_backward=True,
              attention_column_share=0.3, mlp_column_share=0.4, gemm_backward_s=10.0)
    bf16 = model_parallel_comm(**kw)
    fp8 = model_parallel_comm(**kw, sp_gather_bytes_per_element=1.0)
    nvfp4 = model_parallel_comm(**kw, sp_gather_bytes_per_element=0.5625)
    plain = model_parallel_comm(**dict(kw, sp_async_backward=False))
    assert nvfp4.tensor_s < fp8.tensor_s < bf16.tensor_s < plain.tensor_s
    # userbuffers or a blocking launch: the old pricing
    assert model_parallel_comm(**kw, tp_comm_overlap=True).tensor_s == model_parallel_comm(
        **dict(kw, sp_async_backward=False), tp_comm_overlap=True).tensor_s
    assert model_parallel_comm(**kw, launch_blocking=True).tensor_s == plain.tensor_s


@given(gemm_b=st.floats(0, 10), width=st.sampled_from([0.0, 0.5625, 1.0, 1.03125]), moe=st.integers(0, 20))
def test_te_backward_overlap_never_exposes_more_than_a_bf16_pass_pair(gemm_b: float, width: float, moe: int):
    kw = dict(BASE, tp=4, pp=1, recompute=False, sequence_parallel=True, moe_layers=moe)
    sp = model_parallel_comm(**kw, sp_async_backward=True, sp_gather_bytes_per_element=width,
                             attention_column_share=0.3, mlp_column_share=0.4, gemm_backward_s=gemm_b)
    # with no GEMM to hide behind, the re-gather is a third collective per pair (1.5x the old backward, 1.25x the
    # micro-step), and an all-gather + reduce-scatter pays two latencies where the all-reduce paid one
    assert 0.0 <= sp.tensor_s <= 1.3 * model_parallel_comm(**kw).tensor_s + 1e-9


def test_forward_shares_of_each_kind_for_a_forward_only_pass():
    """DPO's reference forward pays each kind's forward share (plan.time.reference_forward_of): the ring exchange's
    first forward, the Ulysses all-to-alls of one pass, the EP dispatch + combine (and counts) in full, and the
    activation half of the pipeline sends."""
    ring = model_parallel_comm(**dict(BASE, cp=2), tp=1, pp=1, recompute=False)
    assert 0 < ring.context_forward_s < ring.context_s
    uly = model_parallel_comm(**dict(BASE, cp=2, ulysses=True), tp=1, pp=1, recompute=True)
    assert uly.context_forward_s == pytest.approx(uly.context_s / 3)  # forward, recompute, backward
    moe = dict(BASE, moe_layers=20, top_k=8, ep=4, experts=64)
    ep = model_parallel_comm(**moe, tp=1, pp=1, recompute=False)
    assert ep.expert_forward_s > 0 and ep.expert_forward_s > ep.expert_s / 2  # the counts go with the forward
    hidden = model_parallel_comm(**moe, tp=1, pp=2, recompute=False, ep_comm_overlap=True, compute_forward_s=1.0,
                                 compute_backward_s=2.0, micro_steps=8)
    assert hidden.expert_forward_s == pytest.approx(ep.expert_forward_s)  # a forward-only pass hides none
    pp = model_parallel_comm(**BASE, tp=1, pp=4, recompute=False)
    assert pp.pipeline_p2p_forward_s == pytest.approx(pp.pipeline_p2p_s / 2)
    none = model_parallel_comm(**BASE, tp=8, pp=1, recompute=False)
    assert (none.context_forward_s, none.expert_forward_s, none.pipeline_p2p_forward_s) == (0.0, 0.0, 0.0)
