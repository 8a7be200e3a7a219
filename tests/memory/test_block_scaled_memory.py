"""The bytes MXFP8 and NVFP4 training add (memory.fp8), hand-counted for Llama-3.1-8B's decoder linears: per layer
q/o 4096x4096, k/v 4096x1024, gate/up 4096x14336, down 14336x4096 = 218,103,808 weights, 32 layers."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.fp8 import (
    fp8_model_bytes,
    quantized_element_bytes,
    saved_input_bytes,
    saves_quantized_input,
    transformer_engine_linears,
)
from trainfit.memory.weights import quantized_linear_params
from trainfit.plan.terms import fp8_linear_input_bytes, fp8_weight_bytes
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Fp4Recipe, Fp8Recipe, TensorParallelImpl

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
P = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
LINEARS = 32 * 7
MEGATRON, DTENSOR = TensorParallelImpl.MEGATRON, TensorParallelImpl.DTENSOR


def test_hand_count_of_the_linears():
    assert P == 6_979_321_856 == quantized_linear_params(LLAMA8)


def test_element_bytes_carry_their_block_scales():
    assert quantized_element_bytes(Fp8Recipe.MXFP8) == 1 + 1 / 32  # e4m3 + one e8m0 per 32
    assert quantized_element_bytes(Fp4Recipe.NVFP4) == 0.5 + 1 / 16  # e2m1 + one e4m3 per 16
    assert quantized_element_bytes(Fp8Recipe.BLOCKWISE) == 1 + 4 / 128
    assert quantized_element_bytes(Fp8Recipe.DELAYED) == 1.0


def test_who_runs_the_linears():
    for r in (Fp8Recipe.MXFP8, Fp4Recipe.NVFP4):
        assert transformer_engine_linears(recipe=r, tensor_parallel_impl=MEGATRON)
        assert not transformer_engine_linears(recipe=r, tensor_parallel_impl=DTENSOR)  # torchao / torchtitan
    # torchao MXFP8 saves the bf16 input (mx_mm), torchao NVFP4 its column-wise fp4 copy (nvfp4_mm_triton)
    assert not saves_quantized_input(recipe=Fp8Recipe.MXFP8, tensor_parallel_impl=DTENSOR)
    assert saves_quantized_input(recipe=Fp4Recipe.NVFP4, tensor_parallel_impl=DTENSOR)


def test_weight_copies_by_stack():
    # Transformer Engine: row-wise and column-wise copies, each with its block scales, cached through the step
    assert fp8_model_bytes(LLAMA8, recipe=Fp8Recipe.MXFP8, transformer_engine=True) == pytest.approx(
        14_394_851_328)  # 2 x 1.03125 x P, no state beyond the scales
    assert fp8_model_bytes(LLAMA8, recipe=Fp4Recipe.NVFP4, transformer_engine=True) == pytest.approx(
        2 * 0.5625 * P + LINEARS * 3 * 4)  # + one fp32 amax per quantised tensor
    # torchao: MXFP8 keeps nothing (re-quantises in backward); NVFP4 saves the column-wise weight for dgrad
    assert fp8_model_bytes(LLAMA8, recipe=Fp8Recipe.MXFP8, transformer_engine=False) == 0.0
    assert fp8_model_bytes(LLAMA8, recipe=Fp4Recipe.NVFP4, transformer_engine=False) == pytest.approx(
        0.5625 * P + LINEARS * 3 * 4)
    # the existing recipes are unchanged by the new argument
    for r in (Fp8Recipe.DELAYED, Fp8Recipe.CURRENT, Fp8Recipe.BLOCKWISE):
        assert fp8_model_bytes(LLAMA8, recipe=r, transformer_engine=True) == fp8_model_bytes(LLAMA8, recipe=r)


def _card(impl: str, checkpointing: bool = False, **precision):
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "b200"},
                           "parallel": {"strategy": "zero1" if impl == "megatron" else "fsdp",
                                        "tensor_parallel_impl": impl, "gradient_checkpointing": checkpointing},
                           "precision": precision})


@pytest.mark.parametrize("impl,precision,checkpointing,weights,saved", [
    ("megatron", {"compute": "fp8", "fp8_recipe": "mxfp8"}, False, 2 * (1 + 1 / 32) * P, 1 + 1 / 32),
    ("dtensor", {"compute": "fp8", "fp8_recipe": "mxfp8"}, False, 0.0, 0.0),
    ("megatron", {"compute": "fp4", "fp4_recipe": "nvfp4"}, False, 2 * 0.5625 * P + LINEARS * 12, 0.5625),
    ("dtensor", {"compute": "fp4", "fp4_recipe": "nvfp4"}, False, 0.5625 * P + LINEARS * 12, 0.5625),
    # checkpointed: TE's cached copies stay; torchao NVFP4's saved column-wise copies go with the layers' saved
    # tensors, but for the one layer recomputed and run backward at a time (0.5625 B x P / 32)
    ("megatron", {"compute": "fp8", "fp8_recipe": "mxfp8"}, True, 2 * (1 + 1 / 32) * P, 1 + 1 / 32),
    ("dtensor", {"compute": "fp8", "fp8_recipe": "mxfp8"}, True, 0.0, 0.0),
    ("megatron", {"compute": "fp4", "fp4_recipe": "nvfp4"}, True, 2 * 0.5625 * P + LINEARS * 12, 0.5625),
    ("dtensor", {"compute": "fp4", "fp4_recipe": "nvfp4"}, True, 0.5625 * P / 32 + LINEARS * 12, 0.5625),
])
def test_the_plan_terms(impl, precision, checkpointing, weights, saved):
    card = _card(impl, checkpointing, **precision)
    assert fp8_weight_bytes(card, LLAMA8, scale=1.0)[0] == pytest.approx(weights)
    assert fp8_linear_input_bytes(card) == saved
    if saved:
        assert saved == saved_input_bytes(recipe=card.precision.gemm_recipe)


def test_plan_peaks_order():
    # the same sft step on one B200: TE MXFP8 holds its two weight copies on top of bf16, NVFP4 half of that
    from trainfit.plan import make_plan

    peak = {k: make_plan(_card("megatron", **p)).peak.device for k, p in (
        ("bf16", {"compute": "bf16"}), ("mx", {"compute": "fp8", "fp8_recipe": "mxfp8"}),
        ("nv", {"compute": "fp4", "fp4_recipe": "nvfp4"}))}
    assert peak["bf16"] < peak["nv"] < peak["mx"]


def test_torchtitan_per_op_checkpointing_keeps_no_nvfp4_linear_output():
    # torchao NVFP4's scaled_mm is outside torchtitan's per-op save list: a checkpointed layer keeps its input and
    # the attention's saved set only, and drops the column-wise weight copies it saved for backward
    from trainfit.memory.activations import activation_bytes
    from trainfit.memory.weights import TrainableSpec
    from trainfit.plan.terms import sac_saves_linear_outputs
    from trainfit.spec.enums import Attention, SelectiveCheckpointing

    kw = dict(micro_batch_size=2, seq_len=1024, attention=Attention.SDPA, trainable=TrainableSpec(),
              selective=SelectiveCheckpointing.OP)
    bf16 = activation_bytes(LLAMA8, **kw).checkpointed_per_layer[0]
    nv = activation_bytes(LLAMA8, **kw, sac_saves_linear_outputs=False).checkpointed_per_layer[0]
    t, h, q, heads = 2 * 1024, 4096, 4096, 32
    assert nv == t * (2 * h + 2 * q + 4 * heads)  # layer input, SDPA output and fp32 logsumexp
    # the odd matmuls bf16 keeps: q (4096), v (1024), gate (14336), down (4096) of q, k, v, o, gate, up, down
    assert bf16 - nv == 2 * t * (4096 + 1024 + 14336 + 4096)
    sac = load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "b200"},
                          "parallel": {"strategy": "fsdp", "gradient_checkpointing": False,
                                                       "selective_checkpointing": "op"},
                          "precision": {"compute": "fp4", "fp4_recipe": "nvfp4"}})
    assert not sac_saves_linear_outputs(sac)
    # the amax state and the column-wise copy of the one layer being recomputed
    assert fp8_weight_bytes(sac, LLAMA8, scale=1.0)[0] == pytest.approx(LINEARS * 12 + 0.5625 * P / 32)
    assert sac_saves_linear_outputs(_card("megatron", compute="fp4", fp4_recipe="nvfp4"))


def test_nvfp4_primary_weights_replace_the_bf16_weights_and_their_copies():
    from trainfit.memory.fp8 import fp8_param_bytes_per_weight

    assert fp8_param_bytes_per_weight(recipe=Fp4Recipe.NVFP4, non_tn_gemm=True) == 2 * 0.5625
    card = load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "gb200"},
                           "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
                           "precision": {"compute": "fp4", "fp4_recipe": "nvfp4", "fp4_params": True}})
    assert card.precision.quantized_params
    # held: 1.125 B per weight and one fp32 amax per quantised tensor; the bf16 weights (2 B) are not kept
    assert fp8_weight_bytes(card, LLAMA8, scale=1.0)[0] == pytest.approx(1.125 * P + LINEARS * 12 - 2.0 * P)


def test_fp4_params_is_read_with_megatron_fp4_only():
    from trainfit.errors import CardError

    def err(parallel, **precision):
        with pytest.raises(CardError) as exc:
            load_card_dict({"method": "sft", "hardware": {"gpu": "gb200"}, "parallel": parallel,
                            "precision": precision})
        return str(exc.value)

    assert err({}, compute="fp8", fp8_recipe="mxfp8", fp4_params=True) == (
        "precision.fp4_params: only read with precision.compute: fp4 (compute is 'fp8')")
    assert err({"strategy": "zero1"}, compute="fp4", fp4_recipe="nvfp4", fp4_params=True).startswith(
        "precision.fp4_params: NVFP4 primary weights are Megatron-Core's")
    assert err({"strategy": "fsdp", "tensor_parallel_impl": "megatron"}, compute="fp4", fp4_recipe="nvfp4",
               fp4_params=True) == ("precision.fp4_params: strategy 'fsdp' is not modelled with NVFP4 primary weights;"
                                    " allowed: single, ddp, zero1")


def test_torchao_nvfp4_bf16_tail_under_checkpointing_keeps_one_layers_copy():
    # 27 quantised layers of 32, every layer checkpointed: their saved column-wise copies go, the 5 bf16 layers had
    # none, one layer's copy is live during its recompute and backward; the amax state of the 27 layers stays
    card = _card("dtensor", True, compute="fp4", fp4_recipe="nvfp4", bf16_last_layers=5)
    assert fp8_weight_bytes(card, LLAMA8, scale=1.0)[0] == pytest.approx(27 * 7 * 12 + 0.5625 * P / 32)
    # without checkpointing: the 27 layers' copies and state
    card = _card("dtensor", compute="fp4", fp4_recipe="nvfp4", bf16_last_layers=5)
    assert fp8_weight_bytes(card, LLAMA8, scale=1.0)[0] == pytest.approx(27 * (0.5625 * P / 32 + 7 * 12))


def _pp_card(**precision):
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft",
                           "hardware": {"gpu": "b200", "gpus_per_node": 4},
                           "parallel": {"strategy": "ddp", "tensor_parallel_impl": "megatron", "pipeline_parallel": 4,
                                        "gradient_checkpointing": False},
                           "batch": {"micro_batch_size": 1, "seq_len": 1024, "grad_accum": 4},
                           "precision": {"compute": "fp4", "fp4_recipe": "nvfp4", **precision}})


def _stage_weights(card):
    from trainfit.memory.pipeline import stage_of
    from trainfit.plan.ranks import rank_terms
    from trainfit.plan.stages import parallel_sharding, prepare

    layout, _ = prepare(card, LLAMA8, card.world_size, card.batch.seq_len)
    sharding = parallel_sharding(card, layout, train_gpus_per_node=card.hardware.gpus_per_node)
    return [rank_terms(card, LLAMA8, sharding, layout, stage_of(layout, 32, s), later=False)[0].weights
            for s in range(4)]


def test_pipeline_stages_read_the_bf16_layers_by_global_index():
    # PP 4 of Llama-3.1-8B: 8 layers per stage. Megatron-Core's get_fp4_context takes the global layer number, so
    # bf16_last_layers 4 are layers 28-31, all on the last stage: stages 0-2 keep all 8 layers' TE row- and
    # column-wise NVFP4 copies (2 x 0.5625 B per weight) and amax state, the last stage half of them
    stage = 2 * 0.5625 * P / 4 + 8 * 7 * 12
    base, tail = _stage_weights(_pp_card()), _stage_weights(_pp_card(bf16_last_layers=4))
    assert [b - t for b, t in zip(base, tail)] == pytest.approx([0.0, 0.0, 0.0, stage / 2])
    # the same through fp8_weight_bytes on the stage spec with the stage's global indices
    from trainfit.memory.pipeline import Stage
    from trainfit.plan.ranks import stage_spec

    card = _pp_card(bf16_last_layers=4)
    for layers, held in ((range(8), stage), (range(24, 32), stage / 2)):
        st = Stage(index=0, layers=tuple(layers), chunk_layers=tuple(layers), first=False, last=False, warmup=1,
                   total_forwards=4)
        assert fp8_weight_bytes(card, stage_spec(LLAMA8, st), scale=1.0, layers=st.layers,
                                model_layers=32)[0] == pytest.approx(held)
    # a tail longer than a stage (14 of 32): stage 3 none, stage 2 two of its eight layers
    deep = _pp_card(bf16_last_layers=14)
    assert [b - t for b, t in zip(base, _stage_weights(deep))] == pytest.approx([0.0, 0.0, stage * 6 / 8, stage])


def test_bf16_layers_save_their_linear_inputs_in_the_compute_dtype():
    # Megatron-Core runs the bf16 layers outside the fp4 autocast: their linears save the 2 B inputs. Per token of a
    # Llama-3.1-8B layer: bf16 saves q/k/v's input (h), gate/up's (h) and down's (I) (o's input is the SDPA output,
    # kept anyway); NVFP4 saves the 0.5625 B column-wise copies of all four inputs (o's beside the SDPA output)
    from trainfit.memory.activations import activation_bytes
    from trainfit.memory.weights import TrainableSpec
    from trainfit.spec.enums import Attention

    kw = {"micro_batch_size": 2, "seq_len": 1024, "attention": Attention.SDPA, "trainable": TrainableSpec()}
    nv = activation_bytes(LLAMA8, **kw, linear_input_bytes=0.5625)
    tail = activation_bytes(LLAMA8, **kw, linear_input_bytes=0.5625, bf16_layers=(1, 2)).per_layer
    t, h, q, inter = 2048, 4096, 4096, 14336
    fp4_layer = nv.per_layer[5]
    bf16_layer = fp4_layer + t * 2 * (2 * h + inter) - t * 0.5625 * (2 * h + q + inter)
    assert [tail[0], tail[1], tail[29], tail[30], tail[31]] == [bf16_layer, fp4_layer, fp4_layer, bf16_layer,
                                                                 bf16_layer]


def test_pipeline_stage_activations_keep_the_model_numbering():
    # the rank walk runs the per-op model on the whole model's shard spec and picks the stage's layers, so the bf16
    # layers (28-31 of 32) save 2 B inputs on the last stage only
    from trainfit.memory.pipeline import stage_of
    from trainfit.plan.ranks import rank_terms
    from trainfit.plan.stages import parallel_sharding, prepare

    def acts(card):
        layout, _ = prepare(card, LLAMA8, card.world_size, card.batch.seq_len)
        sharding = parallel_sharding(card, layout, train_gpus_per_node=card.hardware.gpus_per_node)
        return [rank_terms(card, LLAMA8, sharding, layout, stage_of(layout, 32, s), later=False)[0]
                .activations.per_layer for s in range(4)]

    base, tail = acts(_pp_card()), acts(_pp_card(bf16_last_layers=4))
    t, h, q, inter = 1024, 4096, 4096, 14336
    more = t * 2 * (2 * h + inter) - t * 0.5625 * (2 * h + q + inter)
    assert [[b_ - a_ for a_, b_ in zip(x, y)] for x, y in zip(base, tail)] == [[0] * 8] * 3 + [[0] * 4 + [more] * 4]
