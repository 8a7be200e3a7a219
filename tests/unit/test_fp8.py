"""fp8 compute: card validation, the fp8 state bytes by recipe, GEMMs at the fp8 rate."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.memory.fp8 import AMAX_HISTORY_LEN, fp8_bytes, fp8_scaling_state_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Fp8Recipe


def _card(**prec):
    return {"model": {"id": "meta-llama/Llama-3.1-8B"}, "method": "sft",
            "hardware": {"gpu": prec.pop("gpu", "h100-sxm"), "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": "selective"},
            "batch": {"micro_batch_size": 2, "seq_len": 8192}, "precision": prec}


def test_fp8_needs_a_recipe():
    with pytest.raises(CardError, match=r"^precision.fp8_recipe: required .*allowed: delayed, current, blockwise or mxfp8$"):
        load_card_dict(_card(compute="fp8"))


def test_fp8_refused_on_ampere_naming_the_gpus_that_have_it():
    with pytest.raises(CardError) as e:
        load_card_dict(_card(compute="fp8", fp8_recipe="current", gpu="a100-80gb"))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("precision.compute: fp8 needs fp8 tensor cores")
    assert "h100-sxm" in msg and "l40s" in msg and "a100" not in msg.split("GPUs with them:")[1]


def test_recipe_without_fp8_is_refused():
    with pytest.raises(CardError, match="precision.fp8_recipe: only read with precision.compute: fp8"):
        load_card_dict(_card(fp8_recipe="delayed"))


def test_fp8_state_by_recipe():
    n, lin = 7e9, 224
    delayed = fp8_bytes(recipe=Fp8Recipe.DELAYED, linears=lin, linear_weight_params=n)
    assert delayed == 2 * n + lin * 5 * (AMAX_HISTORY_LEN + 2) * 4  # copy + transpose, amax history + scales
    assert fp8_bytes(recipe=Fp8Recipe.CURRENT, linears=lin, linear_weight_params=n) == lin * 5 * 2 * 4
    block = fp8_scaling_state_bytes(recipe=Fp8Recipe.BLOCKWISE, linears=lin, linear_weight_params=n)
    assert block == pytest.approx(2 * 4 * n / 128**2)


def test_fp8_gemm_faster_where_compute_bound_and_refused_without_rate():
    h100 = default_rates(resolve_gpu("h100-sxm"))
    bf16 = gemm_seconds(m=16384, n=4096, k=4096, rates=h100)
    fp8 = gemm_seconds(m=16384, n=4096, k=4096, rates=h100, dtype_bytes=1)
    assert fp8 == pytest.approx(bf16 / 2, rel=1e-3)  # the catalog's fp8 peak is twice bf16 on Hopper
    a100 = default_rates(resolve_gpu("a100-80gb"))
    assert a100.fp8_matmul_flops_per_s is None
    with pytest.raises(CardError, match="fp8"):
        gemm_seconds(m=4096, n=4096, k=4096, rates=a100, dtype_bytes=1)


def _compiled(card):
    card["parallel"]["compile"] = True
    return card


def test_fp8_plan_is_faster_and_delayed_holds_weight_copies():
    base = make_plan(load_card_dict(_card()))
    cur = make_plan(load_card_dict(_card(compute="fp8", fp8_recipe="current")))
    dly = make_plan(load_card_dict(_card(compute="fp8", fp8_recipe="delayed")))
    assert dly.step_seconds < base.step_seconds < 1.5 * dly.step_seconds
    # current scaling off Megatron is torchao's float8: faster compiled; eager its per-op casts make it slower than
    # bf16 (compute.float8_casts; pytorch/ao issue #2262: eager Float8Linear 0.184 s vs bf16 0.130 s on an H100)
    cur_c = make_plan(load_card_dict(_compiled(_card(compute="fp8", fp8_recipe="current"))))
    assert cur_c.step_seconds < make_plan(load_card_dict(_compiled(_card()))).step_seconds
    assert cur.step_seconds > base.step_seconds
    fwd = {p.name: p.terms for p in cur.time.phases}["forward"]
    assert fwd["memory_bound"] > {p.name: p.terms for p in base.time.phases}["forward"]["memory_bound"]  # casts
    extra = dly.peak.components["weights"] - cur.peak.components["weights"]
    assert extra == pytest.approx(2 * 6.98e9, rel=0.02)  # fp8 copy + transpose of the decoder linears


@pytest.mark.parametrize("target", ["accelerate", "deepspeed", "trl", "openrlhf"])
def test_exports_say_fp8_and_selective_are_not_carried(target):
    """Targets without fp8 or selective recompute say so (verl's Megatron engine carries both: tests/export)."""
    from trainfit.export import export

    e = export(load_card_dict(_card(compute="fp8", fp8_recipe="current")), target)
    assert "precision.compute" in e.lost and "parallel.selective_checkpointing" in e.lost


def test_fp8_copies_per_rank_under_tensor_and_pipeline_parallel():
    """TP8 x PP2: each rank's delayed-scaling copies are 2 B per weight of its own linear shard."""
    def plan(**prec):
        return make_plan(load_card_dict({
            "model": {"id": "meta-llama/Llama-3.1-70B"}, "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "zero1", "tensor_parallel": 8, "pipeline_parallel": 2, "sequence_parallel": True,
                         "gradient_checkpointing": "selective"},
            "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 8}, "precision": prec}))
    cur, dly = plan(compute="fp8", fp8_recipe="current"), plan(compute="fp8", fp8_recipe="delayed")
    extra = dly.peak.components["weights"] - cur.peak.components["weights"]
    linear_per_rank = 80 * (3 * 8192 * 28672 + 2 * 8192 * 8192 + 2 * 8192 * 1024) / 16
    assert extra == pytest.approx(2 * linear_per_rank, rel=0.01)
