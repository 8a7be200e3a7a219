"""torchtitan's padded ``torch._grouped_mm`` wrapper around the routed experts (``MoeExperts.GROUPED_PADDED``,
compute.moe_time.expert_padding_work): its gather and scatter of the routed rows, counted per MoE layer in the
inventory, and the card value."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute import moe_time
from trainfit.compute.inventory import step_inventory
from trainfit.spec.card import CardError, load_card_dict
from trainfit.spec.enums import MoeExperts

QWEN_MOE = resolve_model("Qwen/Qwen3-30B-A3B")


def test_bytes_and_kernels_from_the_traced_ops():
    rows, h = 131072, 2048
    w = moe_time.expert_padding_work(rows=rows, hidden=h)
    assert w.forward_bytes == pytest.approx(12.0 * rows * h)  # vstack copy, gather, scatter: read 2 + write 2 each
    # slice_backward 6, gather 4; the gather's gradient (zeros 2 + index_put 6) is priced apart
    assert w.backward_bytes == pytest.approx(10.0 * rows * h)
    assert (w.forward_kernels, w.backward_kernels) == (18.0, 5.0)
    assert moe_time.expert_padding_work(rows=0, hidden=h) == moe_time.MoeLayerWork(0.0, 0.0, 0.0, 0.0)


def test_inventory_adds_the_wrapper_per_moe_layer_and_nothing_else():
    kw = dict(micro_batch_size=1, seq_len=4096, expert_parallel=1)
    plain = step_inventory(QWEN_MOE, **kw)
    padded = step_inventory(QWEN_MOE, expert_padding=True, **kw)
    layers = QWEN_MOE.num_moe_layers
    extra = moe_time.expert_padding_work(rows=4096 * QWEN_MOE.moe.experts_per_token, hidden=QWEN_MOE.hidden_size)
    assert padded.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        extra.forward_bytes * layers)
    index_b = moe_time.expert_padding_index_backward_bytes(rows=4096 * QWEN_MOE.moe.experts_per_token,
                                                           hidden=QWEN_MOE.hidden_size)
    # and the sum of w1's and w3's input gradients (two grouped GEMMs on the same rows, SPLIT_GATE_UP_DX_SUM_BYTES)
    dx_sum = moe_time.split_gate_up_dx_sum_bytes(rows=4096 * QWEN_MOE.moe.experts_per_token,
                                                 hidden=QWEN_MOE.hidden_size)
    assert padded.layers_backward.memory_bytes - plain.layers_backward.memory_bytes == pytest.approx(
        (extra.backward_bytes + index_b + dx_sum) * layers)
    # the gather's gradient is ATen's eager kernel under compile too: outside the compile memory factor
    assert padded.layers_backward.fused_bytes - plain.layers_backward.fused_bytes == pytest.approx(index_b * layers)
    assert padded.layers_forward.fused_bytes == plain.layers_forward.fused_bytes
    # one more grouped GEMM forward (w1 and w3 apart), two more backward (dX, dW) and the sum of the two dX
    assert padded.layers_forward.kernels - plain.layers_forward.kernels == pytest.approx(
        (extra.forward_kernels + 1) * layers)
    assert padded.layers_backward.kernels - plain.layers_backward.kernels == pytest.approx(
        (extra.backward_kernels + 3) * layers)
    # the padding rows are not counted; the FLOPs are the same, the gate and up GEMMs split in two
    assert sum(g.flops for g in padded.layers_forward.gemms) == pytest.approx(
        sum(g.flops for g in plain.layers_forward.gemms))
    # a dense model has no routed rows to pad
    dense = resolve_model("Qwen/Qwen3-8B")
    assert step_inventory(dense, expert_padding=True, **kw) == step_inventory(dense, **kw)


def test_card_value_and_its_refusal_under_megatron_core():
    card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                           "parallel": {"strategy": "fsdp", "moe_experts": "grouped_padded"}})
    assert card.parallel.moe_experts is MoeExperts.GROUPED_PADDED and not MoeExperts.GROUPED_PADDED.is_loop
    with pytest.raises(CardError) as exc:
        load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron",
                                     "moe_experts": "grouped_padded"}})
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("parallel.moe_experts: grouped_padded")
    assert "allowed there: grouped" in msg


def test_a_padded_card_plans_a_slower_step_than_a_grouped_one():
    from trainfit.plan import make_plan

    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    t = {}
    for experts in ("grouped", "grouped_padded"):
        card = load_card_dict({**base, "parallel": {"strategy": "fsdp", "moe_experts": experts}})
        t[experts] = make_plan(card).time.total_s
    assert t["grouped_padded"] > t["grouped"]


def test_the_gather_gradient_runs_at_the_measured_index_put_rate():
    """pytorch/ao #4623's B200 pair: the wrapper's gather forward 0.593 ms and its gradient 1.848 ms over the same
    196,608 x 2,048 bf16 rows, both 8 counted bytes per element: the gradient costs 3.1x its bytes' streaming time."""
    rows, h = 196608, 2048
    assert moe_time.INDEX_PUT_ACCUMULATE_SLOWDOWN == pytest.approx(3.116, abs=1e-3)
    b = moe_time.expert_padding_index_backward_bytes(rows=rows, hidden=h)
    assert b == pytest.approx(8.0 * rows * h * 1.848 / 0.593)
    # at the forward's measured streaming rate the priced bytes take the measured backward's time
    forward_rate = 8.0 * rows * h / 0.593e-3
    assert b / forward_rate == pytest.approx(1.848e-3)
    assert moe_time.expert_padding_index_backward_bytes(rows=0, hidden=h) == 0.0
    # the traced backward total is unchanged: the wrapper's other backward ops plus the gather's gradient
    w = moe_time.expert_padding_work(rows=rows, hidden=h)
    assert w.backward_bytes + moe_time.EXPERT_PADDING_INDEX_BACKWARD_BYTES * rows * h == pytest.approx(
        moe_time.EXPERT_PADDING_BYTES[1] * rows * h)


def test_a_compiled_padded_step_pays_the_gather_gradient_unscaled():
    """Under torch.compile the gather's gradient keeps its full measured cost (the ATen fallback): the padded card's
    extra backward time over the grouped card's is at least those bytes at the card's streaming rate."""
    from trainfit.compute.rates import default_rates
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.plan import make_plan

    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": "h200", "gpus_per_node": 8},
            "batch": {"micro_batch_size": 1, "seq_len": 16384}}
    back = {}
    for experts in ("grouped", "grouped_padded"):
        card = load_card_dict({**base, "parallel": {"strategy": "fsdp", "moe_experts": experts, "compile": True}})
        back[experts] = next(p.seconds for p in make_plan(card).time.phases if p.name == "backward")
    rows = 16384 * QWEN_MOE.moe.experts_per_token
    index_s = (moe_time.expert_padding_index_backward_bytes(rows=rows, hidden=QWEN_MOE.hidden_size)
               * QWEN_MOE.num_moe_layers / default_rates(resolve_gpu("h200")).hbm_bytes_per_s)
    assert back["grouped_padded"] - back["grouped"] >= 0.99 * index_s


def test_padded_experts_run_gate_and_up_as_two_grouped_gemms_of_the_expert_width():
    """torchtitan's / prime-rl's GroupedExperts: ``_grouped_mm(x, w1.T)`` and ``_grouped_mm(x, w3.T)`` apart, so each
    pass has two grouped GEMMs of the expert width where transformers v5's stacked gate_up_proj has one of twice it;
    the input gradients are two GEMMs too, and the weight gradients two."""
    kw = dict(micro_batch_size=1, seq_len=4096, expert_parallel=1)
    width = QWEN_MOE.moe.expert_intermediate_size
    for padded, split in ((False, 1), (True, 2)):
        inv = step_inventory(QWEN_MOE, expert_padding=padded, **kw)
        fwd = next(g for g in inv.layers_forward.gemms if g.name == "gate_up_proj")
        assert (fwd.count / QWEN_MOE.num_moe_layers, fwd.n) == (split, 2 * width // split)
        for name, dim in (("gate_up_proj.dX", "k"), ("gate_up_proj.dW", "n")):
            g = next(g for g in inv.layers_backward.gemms if g.name == name)
            assert (g.count / QWEN_MOE.num_moe_layers, getattr(g, dim)) == (split, 2 * width // split)


def test_split_gate_up_only_for_grouped_padded_experts():
    assert moe_time.split_gate_up_grouped(expert_padding=True, expert_loop=False, grouped_gemm=True)
    assert not moe_time.split_gate_up_grouped(expert_padding=False, expert_loop=False, grouped_gemm=True)
    assert not moe_time.split_gate_up_grouped(expert_padding=True, expert_loop=True, grouped_gemm=True)
    rows, h = 131072, 2048
    assert moe_time.split_gate_up_dx_sum_bytes(rows=rows, hidden=h) == pytest.approx(6.0 * rows * h)
