"""A GPTQ int4 QLoRA base through AutoGPTQ's PyTorch unpacking (``lora.dequant: autogptq_torch``,
``inventory.GPTQ_TORCH_DEQUANT_*``): every forward and recompute unpacks each frozen linear with nine bare aten calls,
three of them on ATen's non-vectorised loop; the backward unpacks nothing (autograd keeps the fp16 weight), where
bitsandbytes NF4 dequantises per use."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as inv_mod
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.errors import CardError
from trainfit.memory.params import linear_groups
from trainfit.spec.card import load_card_dict

SPEC = from_catalog("Qwen/Qwen2.5-7B")
KW = dict(micro_batch_size=1, seq_len=512)
TARGETS = ("all-linear",)


def _inv(**adapter):
    return step_inventory(SPEC, adapter=Adapter(rank=64, targets=TARGETS, **adapter), **KW)


def _weights() -> float:
    return sum(g.in_features * g.out_features * g.count for g in linear_groups(SPEC))  # counts span the layers


def _linears() -> float:
    return sum(g.count for g in linear_groups(SPEC))


def test_forward_and_recompute_pay_the_unpacking_the_backward_does_not():
    lora, gptq = _inv(), _inv(nf4_base=True, gptq_torch_dequant=True)
    w, n = _weights(), _linears()
    for name in ("layers_forward", "layers_recompute"):
        a, b = getattr(lora, name), getattr(gptq, name)
        assert b.memory_bytes - a.memory_bytes == pytest.approx(inv_mod.GPTQ_TORCH_DEQUANT_FORWARD_BYTES_PER_WEIGHT * w)
        assert b.strided_bytes - a.strided_bytes == pytest.approx(
            inv_mod.GPTQ_TORCH_DEQUANT_STRIDED_BYTES_PER_WEIGHT * w)
        assert b.kernels - a.kernels == pytest.approx(inv_mod.GPTQ_TORCH_DEQUANT_FORWARD_KERNELS * n)
        assert b.bare_kernels - a.bare_kernels == pytest.approx(inv_mod.GPTQ_TORCH_DEQUANT_FORWARD_KERNELS * n)
    assert gptq.layers_backward.memory_bytes == pytest.approx(lora.layers_backward.memory_bytes)
    assert gptq.layers_backward.kernels == pytest.approx(lora.layers_backward.kernels)


def test_bitsandbytes_nf4_dequantises_once_a_forward_and_once_a_backward():
    """MatMul4Bit dequantises the weight in its forward and again in its backward (bitsandbytes _functions.py l.516,
    546): one dequantisation each, not the forward's scaled by the elementwise backward factors on top."""
    lora, nf4 = _inv(), _inv(nf4_base=True)
    w, n = _weights(), _linears()
    for name in ("layers_forward", "layers_backward"):
        a, b = getattr(lora, name), getattr(nf4, name)
        assert b.memory_bytes - a.memory_bytes == pytest.approx(inv_mod.NF4_DEQUANT_BYTES_PER_WEIGHT * w)
        assert b.kernels - a.kernels == pytest.approx(n)
    assert nf4.layers_forward.bare_kernels == lora.layers_forward.bare_kernels == 0


def test_the_card_takes_the_kernel_for_qlora_only():
    card = load_card_dict({"method": "sft", "scope": "qlora", "lora": {"dequant": "autogptq_torch"}})
    assert card.lora.dequant.value == "autogptq_torch"
    assert load_card_dict({"method": "sft", "scope": "qlora"}).lora.dequant.value == "bitsandbytes"
    with pytest.raises(CardError, match="lora.dequant"):
        load_card_dict({"method": "sft", "scope": "lora", "lora": {"dequant": "autogptq_torch"}})


def test_compile_leaves_the_dequantisation_kernels_unscaled():
    """Neither bitsandbytes' dequantise kernel nor AutoGPTQ's bare unpacking ops are fused by a compiler: both sit in
    the fused (unscaled) counts, and GPTQ's strided reads keep the strided rate under compile."""
    from trainfit.compute.rates import default_rates
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.training import STRIDED_BANDWIDTH_SHARE, pass_seconds

    lora, nf4, gptq = _inv(), _inv(nf4_base=True), _inv(nf4_base=True, gptq_torch_dequant=True)
    w, n = _weights(), _linears()
    for name in ("layers_forward", "layers_backward"):
        a, b = getattr(lora, name), getattr(nf4, name)
        assert b.fused_bytes - a.fused_bytes == pytest.approx(inv_mod.NF4_DEQUANT_BYTES_PER_WEIGHT * w)
        assert b.fused_kernels - a.fused_kernels == pytest.approx(n)
    s = inv_mod.GPTQ_TORCH_DEQUANT_STRIDED_BYTES_PER_WEIGHT * w
    assert gptq.layers_forward.fused_strided_bytes == pytest.approx(s)
    rates = default_rates(resolve_gpu("h100-sxm"))
    for base, quant, extra_b, strided in ((lora, nf4, inv_mod.NF4_DEQUANT_BYTES_PER_WEIGHT * w, 0.0),
                                          (lora, gptq, inv_mod.GPTQ_TORCH_DEQUANT_FORWARD_BYTES_PER_WEIGHT * w, s)):
        for factor in (1.0, 0.5):
            kw = dict(rates=rates, seq_len=512, backward=False, memory_factor=factor, kernel_factor=factor)
            a = pass_seconds(base.layers_forward, **kw).memory_s
            b = pass_seconds(quant.layers_forward, **kw).memory_s
            want = (extra_b - strided + strided / STRIDED_BANDWIDTH_SHARE) / rates.hbm_bytes_per_s
            assert b - a == pytest.approx(want, rel=1e-6)


def test_torchao_nf4_dequantisation_stays_with_the_compiled_elementwise_work():
    """torchtune's NF4Tensor dequantises with traced PyTorch ops: not in the unscaled counts."""
    lora, tao = _inv(), _inv(nf4_base=True, nf4_torch_ops=True)
    for name in ("layers_forward", "layers_backward"):
        assert getattr(tao, name).fused_bytes == pytest.approx(getattr(lora, name).fused_bytes)
        assert getattr(tao, name).fused_kernels == pytest.approx(getattr(lora, name).fused_kernels)


def test_the_torchtune_preset_marks_its_nf4_base():
    from trainfit.plan.time import adapter_of

    card = dict(model="meta-llama/Llama-3.1-8B", method="sft", scope="qlora", hardware={"gpu": "h100-sxm"})
    assert adapter_of(load_card_dict(card | {"preset": "torchtune"}), SPEC).nf4_torch_ops
    assert adapter_of(load_card_dict(card | {"lora": {"dequant": "torchao"}}), SPEC).nf4_torch_ops
    assert not adapter_of(load_card_dict(card), SPEC).nf4_torch_ops


def test_below_128_rows_one_fused_kernel_reads_the_int4_weight():
    """kernel_switch_threshold 128 (qlinear_cuda_old.py l.32, l.196-200): below it vecquant4matmul, no unpacking."""
    kw = dict(micro_batch_size=1, seq_len=100)
    lora = step_inventory(SPEC, adapter=Adapter(rank=64, targets=TARGETS), **kw)
    gptq = step_inventory(SPEC, adapter=Adapter(rank=64, targets=TARGETS, nf4_base=True, gptq_torch_dequant=True),
                          **kw)
    a, b = lora.layers_forward, gptq.layers_forward
    assert b.memory_bytes - a.memory_bytes == pytest.approx(inv_mod.GPTQ_FUSED_KERNEL_BYTES_PER_WEIGHT * _weights())
    assert b.kernels - a.kernels == pytest.approx(_linears())
    assert b.strided_bytes == pytest.approx(a.strided_bytes) and b.fused_strided_bytes == 0


@pytest.mark.parametrize("quant", [dict(nf4_base=True, gptq_torch_dequant=True), dict(nf4_base=True)])
def test_a_recompute_dequantises_only_the_linears_it_re_runs(quant):
    """Early stop leaves an untargeted down_proj out of the recompute, its dequantisation too; the per-op policy
    re-runs every second matmul and dequantises only those."""
    targets = ("q_proj", "v_proj")
    lora = step_inventory(SPEC, adapter=Adapter(rank=64, targets=targets), **KW)
    q = step_inventory(SPEC, adapter=Adapter(rank=64, targets=targets, **quant), **KW)
    gptq = quant.get("gptq_torch_dequant", False)
    per_w = (inv_mod.GPTQ_TORCH_DEQUANT_FORWARD_BYTES_PER_WEIGHT if gptq else inv_mod.NF4_DEQUANT_BYTES_PER_WEIGHT)
    per_k = inv_mod.GPTQ_TORCH_DEQUANT_FORWARD_KERNELS if gptq else 1
    groups = {g.name: g for g in linear_groups(SPEC)}

    def cost(names):
        return (sum(per_w * groups[n].in_features * groups[n].out_features * groups[n].count for n in names),
                sum(per_k * groups[n].count for n in names))

    rerun = [n for n in groups if n != "down_proj"]
    b, k = cost(rerun)
    assert q.layers_recompute.memory_bytes - lora.layers_recompute.memory_bytes == pytest.approx(b)
    assert q.layers_recompute.kernels - lora.layers_recompute.kernels == pytest.approx(k)
    even = [g.name for g in q.layers_recompute_op.gemms if g.name in groups]
    assert even and len(even) < len(groups)
    b, k = cost(even)
    assert q.layers_recompute_op.memory_bytes - lora.layers_recompute_op.memory_bytes == pytest.approx(b)
    assert q.layers_recompute_op.kernels - lora.layers_recompute_op.kernels == pytest.approx(k)
    if gptq:
        assert q.layers_recompute_op.bare_kernels == pytest.approx(k)
        assert q.layers_recompute_op.strided_bytes - lora.layers_recompute_op.strided_bytes == pytest.approx(
            b / per_w * inv_mod.GPTQ_TORCH_DEQUANT_STRIDED_BYTES_PER_WEIGHT)
