"""fp32 LoRA adapters on an fp32 base under bf16 autocast (``memory.activations._adapter_saved``,
``fp32_stream_autocast``): the adapted module's input is fp32 (fp32 norms), PEFT's cast to the adapter dtype returns it
itself and autocast saves its bf16 casts of x and of lora_A's output, 2·(in + r) per module; on a bf16 base PEFT's
fp32 copies are saved, 4·(in + r)."""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.memory.activations import activation_bytes
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
H, KV, R = 4096, 1024, 16
T = 1024


def _layer(*, fp32_stream: bool, targets: tuple[str, ...]) -> int:
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=R, targets=targets))
    act = activation_bytes(LLAMA8, micro_batch_size=1, seq_len=T, attention=Attention.SDPA, trainable=lora,
                           fp32_stream_autocast=fp32_stream)
    return act.per_layer[1]


def test_fp32_input_under_autocast_saves_16_bit_casts():
    for targets, modules in ((("q_proj",), [H]), (("q_proj", "v_proj"), [H, H])):
        bf16_base = _layer(fp32_stream=False, targets=targets)
        fp32_base = _layer(fp32_stream=True, targets=targets)
        # each module: 4·(in + r) -> 2·(in + r)
        assert bf16_base - fp32_base == sum(2 * T * (i + R) for i in modules)
