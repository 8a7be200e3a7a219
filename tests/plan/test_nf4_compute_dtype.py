"""precision.nf4_compute_dtype: the dtype a QLoRA base's dequantised GEMMs run in. bitsandbytes' Linear4bit takes an
fp32 input's dtype (a model loaded in float32 without autocast), so its GEMMs run at the fp32 non-tensor-core rate
(spec.enums.Nf4ComputeDtype); bf16 (the default) and fp16 plan as before."""

from __future__ import annotations

import pytest

from trainfit.compute.gemm import gemm_seconds
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.time import adapter_of
from trainfit.plan.resolve import model_spec_of
from trainfit.spec.card import load_card_dict


def _card(scope="qlora", **precision):
    return load_card_dict({"model": "Qwen/Qwen3-0.6B", "scope": scope,
                           "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                           "parallel": {"strategy": "single", "gradient_checkpointing": True},
                           "batch": {"micro_batch_size": 2, "seq_len": 4096}, "precision": precision})


def test_the_adapter_carries_the_base_dtype():
    card = _card(nf4_compute_dtype="fp32")
    spec = model_spec_of(card)
    assert adapter_of(card, spec).base_dtype_bytes == 4
    assert adapter_of(_card(), spec).base_dtype_bytes == 2


def test_an_fp32_gemm_runs_at_the_fp32_rate():
    rates = default_rates(resolve_gpu("a100-80gb"))
    m = n = k = 8192
    fp32, bf16 = (gemm_seconds(m=m, n=n, k=k, rates=rates, dtype_bytes=b) for b in (4.0, 2.0))
    # A100: 19.5 TFLOP/s fp32 (CUDA cores) against 312 bf16 (tensor cores)
    assert 2 * m * n * k / fp32 <= rates.fp32_matmul_flops_per_s
    assert fp32 > 8 * bf16


def test_fp32_base_gemms_slow_the_step_and_fp16_does_not():
    bf16, fp16, fp32 = (make_plan(_card(nf4_compute_dtype=d)).step_seconds for d in ("bf16", "fp16", "fp32"))
    assert bf16 == fp16 < fp32


def test_the_field_is_read_for_qlora_only():
    assert _card().precision.nf4_compute_dtype.value == "bf16"
    with pytest.raises(CardError, match="precision.nf4_compute_dtype: read for scope qlora"):
        _card(scope="lora", nf4_compute_dtype="fp32")
    with pytest.raises(CardError, match="nf4_compute_dtype"):
        _card(nf4_compute_dtype="tf32")


def test_a_float32_load_holds_the_unquantised_weights_and_activations_in_fp32():
    """resolve.model_dtype: the embeddings, norms and head (not quantised) and the saved activations take 4 bytes
    where the QLoRA model is loaded in float32; the 4-bit linears keep their packed bytes."""
    from trainfit.plan.resolve import model_dtype
    from trainfit.spec.enums import ComputeDtype
    assert model_dtype(_card(nf4_compute_dtype="fp32")) is ComputeDtype.FP32
    assert model_dtype(_card()) is ComputeDtype.BF16
    bf16, fp32 = (make_plan(_card(nf4_compute_dtype=d)).peak.components for d in ("bf16", "fp32"))
    spec = model_spec_of(_card())
    embed = spec.vocab_size * spec.hidden_size  # Qwen3-0.6B ties its head to the embedding
    assert fp32["weights"] - bf16["weights"] >= 2 * embed
    assert fp32["activations"] > 1.8 * bf16["activations"]


@pytest.mark.parametrize("dequant", ["torchao", "autogptq_torch"])
def test_fp32_compute_dtype_is_bitsandbytes_only(dequant):
    """bitsandbytes' Linear4bit follows an fp32 input's dtype (set_compute_type); torchao's NF4Tensor and AutoGPTQ's
    QuantLinear have no such rule, so the card refuses the setting with them (one line naming the field)."""
    d = {"model": "Qwen/Qwen3-0.6B", "scope": "qlora", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
         "parallel": {"strategy": "single", "gradient_checkpointing": True},
         "batch": {"micro_batch_size": 2, "seq_len": 4096}, "precision": {"nf4_compute_dtype": "fp32"},
         "lora": {"dequant": dequant}}
    with pytest.raises(CardError, match=r"precision.nf4_compute_dtype: fp32 .*lora.dequant " + dequant):
        load_card_dict(d)


def test_a_float32_load_runs_the_routed_experts_in_fp32_too():
    """A QLoRA MoE base loaded in float32: its dequantised routed experts' GEMMs are fp32 like the dense linears."""
    from trainfit.catalog.models import from_catalog
    from trainfit.compute.inventory import Adapter, step_inventory

    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    experts = {"gate_up_proj", "down_proj"}
    for base, want in ((4, {4}), (2, {2})):
        inv = step_inventory(spec, adapter=Adapter(rank=8, targets=("all-linear",), nf4_base=True,
                                                   base_dtype_bytes=base), micro_batch_size=1, seq_len=1024)
        got = {g.dtype_bytes for g in inv.layers_forward.gemms if g.name in experts}
        assert got == want, (base, got)
