"""An expert-parallel rank holding one routed expert (E / ep == 1, Grok-1 or Mixtral at EP 8) times its expert
GEMMs on the routed rows, as a rank with several experts does: ``T / (tp / etp) · k / local experts`` rows
(``moe_time.expert_token_shards``), not every token of the rank as a dense MLP would."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import step_inventory
from trainfit.compute.moe_time import expert_token_shards
from trainfit.plan.time import rank_spec

MOE = from_catalog("Qwen/Qwen3-30B-A3B")  # 128 experts, top-8
SEQ = 4096


def _expert_gemms(*, tp: int, ep: int, etp: int):
    shard = rank_spec(MOE, tp=tp, pp=1, ep=ep, etp=etp)
    inv = step_inventory(shard, micro_batch_size=1, seq_len=SEQ, sequence_shards=tp, expert_parallel=ep,
                         expert_token_shards=expert_token_shards(tp=tp, etp=etp, ep=ep, sequence_parallel=True))
    return [g for g in inv.layers_forward.gemms if g.name in ("gate_up_proj", "down_proj")]


@pytest.mark.parametrize("etp", [1, 2, 4])
def test_one_local_expert_sees_the_routed_rows(etp: int) -> None:
    ep = MOE.moe.num_experts  # one expert per rank
    gemms = _expert_gemms(tp=4, ep=ep, etp=etp)
    assert len(gemms) == 2
    k = MOE.moe.experts_per_token
    for g in gemms:
        assert g.m == pytest.approx(SEQ / (4 / etp) * k / 1)


@pytest.mark.parametrize("ep", [16, 64, 128])
def test_expert_flops_do_not_depend_on_expert_tp(ep: int) -> None:
    """ETP 1 under TP 4 routes a quarter of the tokens through whole experts; ETP 4 all of them through quarter-wide
    ones: the same expert FLOPs per rank, with 8, 2 or 1 local experts."""
    f1 = sum(g.flops for g in _expert_gemms(tp=4, ep=ep, etp=1))
    f4 = sum(g.flops for g in _expert_gemms(tp=4, ep=ep, etp=4))
    assert f1 == pytest.approx(f4)


def test_expert_flops_per_rank_do_not_depend_on_local_experts() -> None:
    """Balanced routing: a rank receives as many routed rows as its EP group sends it, ``T / (tp / etp) · k``,
    spread over its local experts; 8, 2 or 1 of them, the same expert FLOPs."""
    flops = [sum(g.flops for g in _expert_gemms(tp=4, ep=ep, etp=1)) for ep in (16, 64, 128)]
    assert flops[1] == pytest.approx(flops[0])
    assert flops[2] == pytest.approx(flops[0])


def test_routed_experts_run_fp8_under_transformer_engine() -> None:
    """Megatron-Core's TEGroupedMLP runs TE's grouped linears inside the fp8 autocast: 1-byte expert GEMMs and
    their casts; torchao float8 (torchtitan) leaves the grouped experts bf16 here, as before."""
    from trainfit.compute.float8_casts import TORCHAO_COMPILED

    shard = rank_spec(MOE, tp=2, pp=1, ep=8, etp=1)
    kw = dict(micro_batch_size=1, seq_len=SEQ, sequence_shards=2, expert_parallel=8, expert_token_shards=2.0)
    bf16 = step_inventory(shard, **kw)
    te = step_inventory(shard, fp8=True, **kw)
    ao = step_inventory(shard, fp8=True, fp8_casts=TORCHAO_COMPILED, **kw)
    routed = ("gate_up_proj", "down_proj")
    for inv, dtype in ((bf16, 2.0), (te, 1.0), (ao, 2.0)):
        for p in (inv.layers_forward, inv.layers_backward):
            assert {g.dtype_bytes for g in p.gemms if g.name.split(".")[0] in routed} == {dtype}
    # the forward casts include the routed rows' inputs: T / tp · k rows of hidden into gate_up, of the expert
    # width into down_proj, per MoE layer
    from trainfit.compute.float8_casts import TRANSFORMER_ENGINE

    rows = SEQ / 2 * MOE.moe.experts_per_token
    routed_inputs = rows * (MOE.hidden_size + MOE.moe.expert_intermediate_size) * shard.num_moe_layers
    extra = te.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes
    assert extra >= TRANSFORMER_ENGINE.input_forward_bytes * routed_inputs
