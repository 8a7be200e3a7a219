"""``memory.weights.base_weight_bytes(quantized_experts=True)``: under transformers < 5's per-expert loop each expert's
w1 / w3 / w2 is an ``nn.Linear`` that bitsandbytes' replace loop makes a ``Linear4bit`` (transformers 4.48.1 wheel
integrations/bitsandbytes.py l.168, l.202; models/mixtral/modeling_mixtral.py l.73-75), so the experts are NF4, and
PEFT's prepare_model_for_kbit_training skips them (``Params4bit``, peft 0.21.2 other.py l.206-208)."""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.memory.weights import base_weight_bytes
from trainfit.spec.enums import ComputeDtype, Dtype


def test_loop_experts_are_nf4_not_fp32_under_the_kbit_recipe():
    spec = from_catalog("mistralai/Mixtral-8x7B-v0.1")
    fused = base_weight_bytes(spec, weights=Dtype.NF4, compute=ComputeDtype.FP32, quantized_experts=False)
    loop = base_weight_bytes(spec, weights=Dtype.NF4, compute=ComputeDtype.FP32, quantized_experts=True)
    # 32 layers x 8 experts x 3 linears (w1, w3: 4096 -> 14336; w2: 14336 -> 4096) = 768 linears of
    # 4096 x 14336 = 58,720,256 weights. fp32: 234,881,024 B each. NF4 with double quantization:
    # 0.5 x 58,720,256 = 29,360,128 + one absmax byte per 64 (917,504) + 4 B per 16,384 (14,336) + 1,092 fixed
    # = 30,293,060 B. Saving: 768 x (234,881,024 - 30,293,060) = 157,123,556,352 B.
    assert fused - loop == 157_123_556_352
    assert loop < 25.1e9  # 23.3 GB of NF4 experts + the rest: the model fits an 80 GB A100, as the run did
