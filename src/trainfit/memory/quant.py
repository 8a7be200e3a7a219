"""Storage bytes of quantized linear weights, including their quantization constants.

Formulas follow the storage layout of the libraries that produce them:

* **nf4 / fp4 (bitsandbytes ``Linear4bit``)**: packed 4-bit codes (n/2 B), one absmax per
  64-element block. With double quantization the absmax is uint8 (1 B per block) plus an fp32
  second-level absmax per 256 blocks, offsets and per-layer code tables; measured on
  bitsandbytes 0.50.2 (GROUND_TRUTH.md §9): ``0.5·n + n/64 + 4·ceil(n/16384) + 1,092`` B.
  Without double quantization the absmax is fp32: ``0.5·n + 4·n/64 + 64`` (the 64 B: the 16-entry fp32 NF4 code
  table every ``QuantState`` holds, a new tensor per weight: bitsandbytes 0.50.2 ``functional.py`` l.854
  ``get_4bit_type``, called by ``quantize_4bit`` l.936; checked on the fake-tensor trace, tests/trace/test_qlora_grid.py).
* **int8 (bitsandbytes ``Linear8bitLt``, LLM.int8())**: 1 B per weight plus one fp32 scale per
  output row (``SCB``).
* **fp8 (per-tensor scaled, e.g. torchao/TE float8 weights)**: 1 B per weight plus one fp32
  scale per tensor.
"""

from __future__ import annotations

from math import ceil

from trainfit.spec.enums import Dtype
from trainfit.units import BYTES_PER_DTYPE

NF4_BLOCK = 64
"""Elements per absmax: bitsandbytes' default 4-bit block (``functional.quantize_4bit(..., blocksize=64)`` in
bitsandbytes 0.50.2 ``bitsandbytes/functional.py``), as transformers' ``BitsAndBytesConfig`` leaves it. The one
definition: ``memory.nf4_dequant`` and ``trace.qlora`` import it."""
NF4_DQ_BLOCK_ELEMENTS = 64 * 256
"""Elements covered by one fp32 second-level absmax under double quantization: 4-bit blocks of 64 weights
(``Params4bit(blocksize=64)``, bitsandbytes 0.43.3 ``bitsandbytes/nn/modules.py`` l.217) whose absmax values are
quantized in blocks of 256 (``quantize_blockwise(absmax, blocksize=256)``, ``bitsandbytes/functional.py`` l.1246,
``quantize_4bit`` with ``compress_statistics``)."""
NF4_CODE_BYTES = 64
"""The 16-entry fp32 NF4 code table of each quantized weight's ``QuantState`` (with or without double quantization):
16 x 4 B, a new tensor per ``quantize_4bit`` call (bitsandbytes 0.50.2 ``bitsandbytes/functional.py`` l.854
``get_4bit_type``, l.936)."""
NF4_DQ_CODE_MAP_BYTES = 256 * 4
"""The 256-entry fp32 dynamic map copied per weight for the absmax's own quantization state (bitsandbytes 0.50.2
``bitsandbytes/functional.py`` l.670 ``code.to(A.device, copy=True)``)."""
NF4_DQ_OFFSET_BYTES = 4
"""The fp32 offset (the absmax's mean) that double quantization subtracts before quantizing it (bitsandbytes 0.50.0
tag ``bitsandbytes/functional.py`` l.939 in ``quantize_4bit``: ``offset = _absmax.mean()``)."""
NF4_DQ_FIXED_BYTES = NF4_CODE_BYTES + NF4_DQ_CODE_MAP_BYTES + NF4_DQ_OFFSET_BYTES
"""Per-layer fixed bytes under double quantization: 64 + 1,024 + 4 = 1,092, measured on bitsandbytes 0.50.2
(GROUND_TRUTH.md §9)."""
FP32_BYTES = BYTES_PER_DTYPE[Dtype.FP32.value]


def nf4_absmax_fp32_bytes(weight_elements: int) -> int:
    """Bytes of one fp32 absmax tensor of a 4-bit weight: 4 B per ``NF4_BLOCK`` elements (the stored absmax without
    double quantization; the dequantised one with it)."""
    return FP32_BYTES * ceil(weight_elements / NF4_BLOCK)

QUANTIZED = frozenset({Dtype.NF4, Dtype.INT8, Dtype.FP8})


def nf4_linear_bytes(*, weight_elements: int, double_quant: bool = True) -> float:
    """Bytes of one bitsandbytes NF4/FP4 linear weight of ``weight_elements`` values."""
    blocks = ceil(weight_elements / NF4_BLOCK)
    if double_quant:
        return 0.5 * weight_elements + blocks + 4 * ceil(weight_elements / NF4_DQ_BLOCK_ELEMENTS) + NF4_DQ_FIXED_BYTES
    return 0.5 * weight_elements + nf4_absmax_fp32_bytes(weight_elements) + NF4_CODE_BYTES


def int8_linear_bytes(*, weight_elements: int, out_features: int) -> float:
    """Bytes of one LLM.int8() linear: int8 weights + fp32 row scales."""
    return weight_elements + 4 * out_features


def fp8_linear_bytes(*, weight_elements: int) -> float:
    """Bytes of one per-tensor-scaled fp8 linear."""
    return weight_elements + 4


def linear_weight_bytes(
    *, dtype: Dtype, in_features: int, out_features: int, double_quant: bool = True
) -> float:
    """Storage bytes of one linear weight matrix (bias excluded) in ``dtype``."""
    n = in_features * out_features
    if dtype is Dtype.NF4:
        return nf4_linear_bytes(weight_elements=n, double_quant=double_quant)
    if dtype is Dtype.INT8:
        return int8_linear_bytes(weight_elements=n, out_features=out_features)
    if dtype is Dtype.FP8:
        return fp8_linear_bytes(weight_elements=n)
    return n * BYTES_PER_DTYPE[dtype.value]


def payload_bytes(*, params: float, dtype: Dtype) -> float:
    """Params × bytes per element, without metadata: the seeds' 'theoretical size'."""
    return params * BYTES_PER_DTYPE[dtype.value]
