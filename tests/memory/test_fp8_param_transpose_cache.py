"""precision.fp8_param_transpose_cache: whether an fp8 primary weight keeps its transpose through the step on a GPU
without non-TN fp8 GEMMs. Transformer Engine 1.x makes it in each linear's backward and frees it when Megatron-Core's
disable_parameter_transpose_cache is set (NVIDIA/TransformerEngine v1.6rc2 090e72412e06f44fe43aa4c4564ae11469961c9a
transformer_engine/pytorch/module/linear.py l.408-413 ``weight.transpose_2d(cache=ctx.is_first_microbatch is not
None, ...)``, float8_tensor.py l.575-576 ``if not cache: return tex.fp8_transpose(self._data, self._fp8_dtype)``;
v1.10 08a85d3b2657f1d4e0b478f6682c17fe6bba8b05 module/linear.py l.960-977 fills the cache only when
``is_first_microbatch`` is truthy; Megatron-LM 24.09-alpha.rc0 megatron/core/transformer/custom_layers/
transformer_engine.py l.171-172 passes None under the flag). The bytes by hand, the card's one-line refusal, and the
MLPerf v4.0 L40S / v4.1 H200 Llama-2-70B LoRA rows whose yaml sets the flag, which plan as fitting only with it."""

from __future__ import annotations

import pytest

from step_times_module import load_step_times
from trainfit.catalog.models import from_catalog
from trainfit.cli.main import main
from trainfit.memory.fp8 import (
    fp8_param_bytes_per_weight,
    fp8_param_model_bytes,
    fp8_scaling_state_bytes,
    fp8_linear_count,
    fp8_linear_params,
    largest_linear_weight_params,
)
from trainfit.spec.enums import Fp8Recipe

LLAMA70 = from_catalog("meta-llama/Llama-2-70b-hf")


@pytest.mark.parametrize("recipe", [Fp8Recipe.DELAYED, Fp8Recipe.CURRENT])
def test_per_weight_bytes(recipe):
    assert fp8_param_bytes_per_weight(recipe=recipe, non_tn_gemm=False) == 2.0
    assert fp8_param_bytes_per_weight(recipe=recipe, non_tn_gemm=False, transpose_cached=False) == 1.0
    assert fp8_param_bytes_per_weight(recipe=recipe, non_tn_gemm=True, transpose_cached=False) == 1.0
    # blockwise keeps a separately quantised column-wise copy either way
    assert fp8_param_bytes_per_weight(recipe=Fp8Recipe.BLOCKWISE, non_tn_gemm=False, transpose_cached=False) == 2.0


def test_largest_linear_is_megatrons_fused_fc1():
    """Llama-2-70B: fc1 (gate + up, one Megatron-Core weight) 8,192 x 2 x 28,672 is the largest transpose in flight;
    linear_qkv is 8,192 x (8,192 + 2 x 1,024)."""
    assert largest_linear_weight_params(LLAMA70) == 8192 * 2 * 28672


def test_model_bytes_by_hand():
    """1 B per weight plus one fc1 transpose in flight, at the rank's share (tensor parallel 4: scale 1/4)."""
    scale = 0.25
    p = fp8_linear_params(LLAMA70) * scale
    state = fp8_scaling_state_bytes(recipe=Fp8Recipe.DELAYED, linears=fp8_linear_count(LLAMA70), linear_weight_params=p)
    cached = fp8_param_model_bytes(LLAMA70, recipe=Fp8Recipe.DELAYED, non_tn_gemm=False, scale=scale)
    freed = fp8_param_model_bytes(LLAMA70, recipe=Fp8Recipe.DELAYED, non_tn_gemm=False, scale=scale,
                                  transpose_cached=False)
    assert cached == 2.0 * p + state
    assert freed == 1.0 * p + 8192 * 2 * 28672 * scale + state
    # Blackwell never keeps one: the flag changes nothing there
    assert fp8_param_model_bytes(LLAMA70, recipe=Fp8Recipe.DELAYED, non_tn_gemm=True, transpose_cached=False) == \
        fp8_param_model_bytes(LLAMA70, recipe=Fp8Recipe.DELAYED, non_tn_gemm=True)


def test_refused_without_fp8_params_one_line_exit_2(capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--set", "parallel.tensor_parallel_impl=megatron",
               "--set", "precision.fp8_param_transpose_cache=false"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert ("precision.fp8_param_transpose_cache: false is Transformer Engine 1.x's uncached fp8 primary weight"
            " transpose, read with compute fp8, fp8_params true, fp8_recipe delayed or current and"
            " tensor_parallel_impl megatron") in err and "allowed otherwise: true" in err


def test_export_names_what_it_does_not_write():
    from trainfit.export.common import shared_notes
    from trainfit.spec.card import load_card_dict

    d = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"tensor_parallel_impl": "megatron", "strategy": "zero1"},
         "precision": {"compute": "fp8", "fp8_recipe": "delayed", "fp8_params": True,
                       "fp8_param_transpose_cache": False}}
    notes = shared_notes(load_card_dict(d), "nemo-rl")
    assert any(n.startswith("precision.fp8_param_transpose_cache: false: nemo-rl's file gets no") for n in notes)
    d["precision"]["fp8_param_transpose_cache"] = True
    assert not any("fp8_param_transpose_cache" in n for n in shared_notes(load_card_dict(d), "nemo-rl"))


st = load_step_times("step_times_fp8_param_transpose_cache")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
FLAG_ROWS = ("mlperf40-nv-llama2-70b-lora-h100-1x8", "mlperf40-nv-llama2-70b-lora-h100-8x8",
             "mlperf40-nv-llama2-70b-lora-h100-128x8", "mlperf40-nv-llama2-70b-lora-h200-1x8",
             "mlperf40-nv-llama2-70b-lora-l40s-16x4", "mlperf40-nv-llama2-70b-lora-l40s-96x4",
             "mlperf41-nv-llama2-70b-lora-h100-1x8", "mlperf41-nv-llama2-70b-lora-h100-8x8",
             "mlperf41-nv-llama2-70b-lora-h100-128x8", "mlperf41-nv-llama2-70b-lora-h200-1x8")
# AMD's v5.0 recipe (the AMD and Supermicro MI325X rows): its yaml l.95 sets the flag on ROCm's TE 1.9 fork, whose
# Linear fills the transpose cache only when is_first_microbatch is truthy and whose dgrad GEMM reads a transpose made
# per call (ROCm/TransformerEngine ifu_release_v1.9 @fc5bb05726ccb24f278e591b312f27cf92e72697 module/linear.py
# l.469-470, l.990-1000, float8_tensor.py l.583-663; the rows' notes)
AMD_FLAG_ROWS = ("mlperf50-amd-llama2-70b-lora-mi325x-1x8", "mlperf50-supermicro-llama2-70b-lora-mi325x-1x8")
# v5.1 partner rows on NVIDIA's 24.09 recipe, which carry the field from their first-contact data
V51_PARTNER_ROWS = ("mlperf51-krai-llama2-70b-lora-h200-xd670-2x8", "mlperf51-krai-llama2-70b-lora-h200-xd670-4x8",
                    "mlperf51-krai-llama2-70b-lora-h200-xd670-8x8", "mlperf51-cisco-llama2-70b-lora-h200-c885a-1x8",
                    "mlperf51-cisco-llama2-70b-lora-h200-c885a-2x8", "mlperf51-cisco-llama2-70b-lora-h100-hpf-8x8",
                    "mlperf51-cisco-llama2-70b-lora-h100-hpf-16x8")
FLIPPED = ("mlperf40-nv-llama2-70b-lora-l40s-16x4", "mlperf40-nv-llama2-70b-lora-l40s-96x4",
           "mlperf41-nv-llama2-70b-lora-h200-1x8", *AMD_FLAG_ROWS)


def test_exactly_the_rows_whose_yaml_sets_the_flag():
    """The v4.0 implementation's yaml l.91 and the v4.1 Hopper implementations' l.107 set
    disable_parameter_transpose_cache: True on TE 1.x; the v5.0 rows (TE 2.x, 25.04 container) and the B200 rows
    (no transpose kept) do not carry the field; AMD's v5.0 MI325X recipe (TE 1.9 for ROCm, its yaml l.95) does, its
    v5.1 recipe (ROCm TE d0ef413b5bfe9ea33b1c8626e99fb46967a60712, version not read) does not."""
    keyed = {i for i, e in ENTRIES.items() if e["precision"].get("fp8_param_transpose_cache") is False}
    assert keyed == {*FLAG_ROWS, *AMD_FLAG_ROWS, *V51_PARTNER_ROWS}
    for i in (*FLAG_ROWS, *AMD_FLAG_ROWS):
        assert "'disable_parameter_transpose_cache: True'" in ENTRIES[i]["note"]


@pytest.mark.parametrize("row_id", FLIPPED)
def test_rows_fit_only_with_it(row_id):
    """The runs ran: with the transpose made per linear in the backward the plan fits; with it kept on every weight
    (128.5 GiB of weights on the TP-1 H200 and MI325X, 32.1 GiB on the TP-4 L40S) it does not. Step time is
    unchanged. MI325X: 257.0 GiB planned on the 256 GiB card with the transpose kept (+1.0 GiB), 64.2 GiB of weights
    without it."""
    from trainfit.plan import make_plan

    card, notes = st.map_train(ENTRIES[row_id])
    assert card["precision"]["fp8_param_transpose_cache"] is False
    assert any(n.startswith("fp8 primary weights' transpose made in each linear's backward") for n in notes)
    with_it = make_plan(st.validate(card))
    card["precision"]["fp8_param_transpose_cache"] = True
    without = make_plan(st.validate(card))
    assert with_it.fits and not without.fits
    assert with_it.step_seconds == without.step_seconds
    assert any("precision.fp8_param_transpose_cache false" in n for n in with_it.assumptions)
