"""AutoGPTQ's PyTorch path (``lora.dequant: autogptq_torch``) saves each frozen linear's unpacked fp16 weight for the
input gradient (``torch.matmul(x.half(), weight)``, AutoGPTQ/AutoGPTQ auto_gptq/nn_modules/qlinear/
qlinear_cuda_old.py l.268-269 @ef442d9f70c50a9c1d9f2d4aa8622d1b89c83ea2), from 128 input rows on
(``kernel_switch_threshold``, l.32, l.196-200): 2 B per weight of every layer without checkpointing, one layer's
inside the recompute with it."""

from __future__ import annotations

import copy

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.activations import activation_bytes, saved_frozen_weight_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
QLORA = TrainableSpec(scope=Scope.QLORA, lora=LoraSpec())
H, KV, I = 4096, 1024, 14336
LAYER_WEIGHTS = 2 * H * H + 2 * H * KV + 3 * H * I


def _act(seq_len: int, gptq: bool):
    return activation_bytes(LLAMA8, micro_batch_size=1, seq_len=seq_len, attention=Attention.SDPA, trainable=QLORA,
                            gptq_torch_dequant=gptq)


def test_every_layer_keeps_its_fp16_weights_and_the_first_layer_not_its_qkv():
    base, gptq = _act(2048, False), _act(2048, True)
    extra = [g - b for b, g in zip(base.per_layer, gptq.per_layer)]
    # layer 0: its input (the frozen embedding's output) needs no gradient, so q/k/v record no matmul
    assert extra[0] == 2 * (LAYER_WEIGHTS - H * (H + 2 * KV))
    assert extra[1:] == [2 * LAYER_WEIGHTS] * (LLAMA8.num_layers - 1)
    # under checkpointing a layer keeps only its input; the weights live inside one layer's recompute
    assert gptq.checkpointed_per_layer == base.checkpointed_per_layer
    assert gptq.max_layer - base.max_layer == 2 * LAYER_WEIGHTS


def test_below_the_kernel_switch_threshold_nothing_is_saved():
    assert saved_frozen_weight_bytes(gptq_torch_dequant=True, rows=127) == 0.0
    assert saved_frozen_weight_bytes(gptq_torch_dequant=True, rows=128) == 2.0
    assert saved_frozen_weight_bytes(gptq_torch_dequant=False, rows=4096) == 0.0
    assert _act(100, True) == _act(100, False)


def _activations(dequant: str, checkpointing: bool) -> float:
    card = load_card_dict(dict(model="meta-llama/Llama-3.1-8B", method="sft", scope="qlora",
                               hardware={"gpu": "h100-sxm", "gpus_per_node": 1},
                               batch={"micro_batch_size": 1, "seq_len": 2048},
                               parallel={"gradient_checkpointing": checkpointing}, lora={"dequant": dequant}))
    return max(ph.components.get("activations", 0.0) for ph in make_plan(card).phases)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_plan_counts_the_saved_weights(checkpointing):
    nf4, gptq = _activations("bitsandbytes", checkpointing), _activations("autogptq_torch", checkpointing)
    if checkpointing:  # at most one layer's weights beside the checkpointed inputs
        assert 0 <= gptq - nf4 <= 2 * LAYER_WEIGHTS
    else:
        assert gptq - nf4 == pytest.approx(2 * (32 * LAYER_WEIGHTS - H * (H + 2 * KV)))
