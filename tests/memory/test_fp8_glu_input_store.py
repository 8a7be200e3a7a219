"""precision.fp8_activation_input_store: Megatron-Core's activation_func_fp8_input_store keeps the fused SwiGLU's
input (fc1's gate and up halves) as float8_e4m3fn for the backward (NVIDIA/Megatron-LM as bundled by
mlcommons/training_results_v5.0 @0fdc28f013256aea84fa36fdaf1e0fa46094b18c, GigaComputing/benchmarks/llama2_70b_lora/
implementations/pytorch/Megatron-LM/megatron/core/fusions/fused_bias_swiglu.py l.61-63:
``input_for_backward = input.to(torch.float8_e4m3fn) if fp8_input_store else input``): 1 B per element instead of 2.
The per-layer bytes by hand, the card's one-line refusal, the SwiGLU-only rule and the MLPerf B200 LoRA rows whose
run config sets it (FP8_ACT=1), which plan as fitting only with it."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from step_times_module import load_step_times
from trainfit.catalog.models import from_catalog
from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.memory.activations import FP8_GLU_INPUT_BYTES, activation_bytes, glu_saved_input_bytes
from trainfit.plan.terms import glu_input_bytes
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
FULL = TrainableSpec(scope=Scope.FULL)


def _act(spec, *, glu: float = 0.0, s: int = 512, compiled: bool = False, trainable=FULL, fp8_in: float = 0.0):
    return activation_bytes(spec, micro_batch_size=1, seq_len=s, attention=Attention.SDPA, trainable=trainable,
                            compiled=compiled, linear_input_bytes=fp8_in, glu_input_bytes=glu)


def test_saved_input_bytes_per_element():
    assert glu_saved_input_bytes(compute_dtype_bytes=2, fp8_input_store=False) == 2.0
    assert glu_saved_input_bytes(compute_dtype_bytes=2, fp8_input_store=True) == FP8_GLU_INPUT_BYTES == 1.0


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("fp8_in", [0.0, 1.0])
def test_each_layer_keeps_gate_and_up_at_one_byte(compiled, fp8_in):
    """Per token of a Llama layer the SwiGLU's saved gate and up (2 x intermediate) drop from 2 B to 1 B; nothing else
    moves (act(gate), the linears' saved inputs, the head, the embedding)."""
    s, i = 512, LLAMA8.intermediate_size
    bf16, fp8 = _act(LLAMA8, s=s, compiled=compiled, fp8_in=fp8_in), _act(LLAMA8, glu=1.0, s=s, compiled=compiled,
                                                                          fp8_in=fp8_in)
    for lb, lf in zip(bf16.per_layer, fp8.per_layer):
        assert lb - lf == s * 2 * i * (2 - 1) == 512 * 2 * 14336
    assert (fp8.head, fp8.embedding, fp8.checkpointed_per_layer) == (bf16.head, bf16.embedding,
                                                                      bf16.checkpointed_per_layer)


def test_lora_layers_keep_it_too():
    """A LoRA run's frozen MLP still runs the SwiGLU on an input that needs a gradient (after the first adapter)."""
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=16, alpha=32, targets=("q_proj", "k_proj", "v_proj",
                                                                                      "o_proj")))
    s, i = 1024, LLAMA8.intermediate_size
    plain, stored = _act(LLAMA8, s=s, trainable=lora), _act(LLAMA8, glu=1.0, s=s, trainable=lora)
    assert [p - q for p, q in zip(plain.per_layer, stored.per_layer)] == [s * 2 * i] * LLAMA8.num_layers


def test_swiglu_only():
    """Megatron-Core's TransformerConfig refuses the option for any MLP but SwiGLU (transformer_config.py l.835-837:
    'Storing activation input in FP8 is supported only for SwiGLU.'), and so does the plan."""
    card = SimpleNamespace(precision=SimpleNamespace(fp8_activation_input_store=True))
    assert glu_input_bytes(card, LLAMA8) == 1.0
    with pytest.raises(CardError, match="precision.fp8_activation_input_store: .* only for SwiGLU"):
        glu_input_bytes(card, replace(LLAMA8, hidden_act="gelu_pytorch_tanh"))
    off = SimpleNamespace(precision=SimpleNamespace(fp8_activation_input_store=False))
    assert glu_input_bytes(off, replace(LLAMA8, hidden_act="gelu_pytorch_tanh")) == 0.0


def test_refused_off_megatron_one_line_exit_2(capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--set", "precision.fp8_activation_input_store=true"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert ("precision.fp8_activation_input_store: true is Megatron-Core's activation_func_fp8_input_store, read with"
            " tensor_parallel_impl: megatron (got dtensor); allowed otherwise: false") in err


st = load_step_times("step_times_fp8_glu_input_store")
FP8_ACT_ROWS = ("mlperf50-nv-llama2-70b-lora-b200-1x8", "mlperf50-nv-llama2-70b-lora-gb200-8g",
                "mlperf50-dell-llama2-70b-lora-b200-xe9680l-1x8", "mlperf50-oracle-llama2-70b-lora-b200-1x8",
                "mlperf50-gigacomputing-llama2-70b-lora-b200-g893sd1-1x8", "mlperf50-oracle-llama2-70b-lora-gb200-2x4")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}


@pytest.mark.parametrize("row_id", FP8_ACT_ROWS)
def test_mlperf_fp8_act_rows_fit_only_with_it(row_id):
    """Each row's run config sets FP8_ACT=1 (l.13), which its yaml reads into activation_func_fp8_input_store (l.46),
    and the run ran: the plan fits with the option and, 70B at 8,192 tokens without recompute, not without it
    (80 layers x 8,192 tokens x 2 x 28,672 x 1 B = 35 GiB apart)."""
    from trainfit.plan import make_plan

    e = ENTRIES[row_id]
    assert e["precision"]["fp8_activation_input_store"] is True
    assert "l.13 'export FP8_ACT=1'" in e["note"] and "activation_func_fp8_input_store" in e["note"]
    card, notes = st.map_train(e)
    assert card["precision"]["fp8_activation_input_store"] is True
    assert any(n.startswith("fp8 SwiGLU input store") for n in notes)
    with_it = make_plan(st.validate(card))
    card["precision"]["fp8_activation_input_store"] = False
    without = make_plan(st.validate(card))
    assert with_it.fits and not without.fits
    assert any(n.startswith("precision.fp8_activation_input_store: each dense SwiGLU") for n in with_it.assumptions)
    assert not any(n.startswith("precision.fp8_activation_input_store") for n in without.assumptions)
    saved = 80 * 8192 * 2 * 28672 * 1.0
    assert with_it.peak.phase == without.peak.phase and with_it.peak.at == without.peak.at
    assert without.peak.components["activations"] - with_it.peak.components["activations"] == saved
    # the device figure: the same less the caching allocator's rounding of the freed blocks
    assert without.peak.device - with_it.peak.device == pytest.approx(saved, abs=2 * 2**20)


def test_export_names_what_it_does_not_write():
    from trainfit.export.common import shared_notes
    from trainfit.spec.card import load_card_dict

    d = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"tensor_parallel_impl": "megatron"}, "precision": {"fp8_activation_input_store": True}}
    notes = shared_notes(load_card_dict(d), "nemo-rl")
    assert any(n.startswith("precision.fp8_activation_input_store: nemo-rl's file gets no") for n in notes)
    d["precision"]["fp8_activation_input_store"] = False
    assert not any("fp8_activation_input_store" in n for n in shared_notes(load_card_dict(d), "nemo-rl"))
