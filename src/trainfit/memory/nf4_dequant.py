"""bitsandbytes NF4 (QLoRA) dequantisation temporaries: what one 4-bit linear holds while its GEMM runs.

bitsandbytes 0.50.2 (PyPI wheel, files as installed):

* **Forward** (``MatMul4Bit.forward`` -> ``bitsandbytes::gemm_4bit``, ``autograd/_functions.py`` l.322-346) on CUDA
  runs the unfused ``_dequant_linear_fallback`` (``backends/cuda/ops.py`` l.904-916) for more than 1,536 rows
  (l.922-926, l.954) and for every row count at which ``_gemm_4bit_use_custom_cuda`` (l.584-812) prefers it: on
  sm90 (H100/H200) a weight of 4 Mi elements or more takes the fused kernel only up to 16-64 rows (l.745-757),
  on sm80 up to 16-128 rows (l.711-734), on sm100 none beyond 32 (l.618-623). The fallback holds ``absmax_dq``
  (fp32, one per 64-element block) and ``absmax = absmax_dq + offset`` (another) when double quantization nests
  the absmax, and the weight dequantised to the input's dtype, until ``F.linear`` has written its output.
  Short rows on the fused kernel hold none of this: the term is an upper bound there.
* **Backward** (``MatMul4Bit.backward``, l.384): ``torch.matmul(grad_output, F.dequantize_4bit(B, state).to(
  grad_output.dtype))``. ``F.dequantize_4bit`` (``functional.py`` l.1052-1066) makes the fp32 absmax
  (``dequantize_blockwise``; ``+= offset`` in place), then the weight in ``quant_state.dtype``: the dtype the
  checkpoint was loaded in before ``Params4bit`` quantized it, the model dtype here (so ``.to`` copies nothing).
  MatMul4Bit saves only the packed weight (l.358), never its input: these temporaries are the whole
  QLoRA-specific cost of the base layer's backward, on every GPU and row count.

Checked on the fake-tensor trace, which decomposes ``gemm_4bit`` into the fallback's steps
(``trainfit.trace.qlora``; tests/trace/test_qlora_grid.py). Pure: no torch.
"""

from __future__ import annotations

from math import ceil

from trainfit.memory.params import linear_groups
from trainfit.spec.model import ModelSpec

NF4_BLOCK = 64
"""Elements per absmax (bitsandbytes' default 4-bit block: ``functional.quantize_4bit(..., blocksize=64)`` in
bitsandbytes 0.50.2 ``bitsandbytes/functional.py``)."""
FP32 = 4


def _absmax_fp32_bytes(weight_elements: int) -> int:
    return FP32 * ceil(weight_elements / NF4_BLOCK)


def forward_gemm_bytes(*, in_features: int, out_features: int, rows: int, compute_dtype_bytes: int,
                       double_quant: bool = True, adapter_input_bytes: int = 0) -> float:
    """Bytes one ``Linear4bit``'s forward GEMM holds beyond the layer's saved activations, on the unfused CUDA path:
    the two fp32 absmax tensors (double quantization only; a plain absmax is fp32 already and used as it is), the
    weight dequantised to the compute dtype (``out × in``), the output (``rows × out``) and the input
    (``rows × in``), which MatMul4Bit does not save; less what an adapter on this linear saves of that input
    (``adapter_input_bytes`` per element: PEFT's fp32 copy for lora_A, made after the base GEMM,
    ``peft/tuners/lora/bnb.py`` l.527, l.546-549) and the layer's saved set already counts."""
    n = in_features * out_features
    absmax = 2 * _absmax_fp32_bytes(n) if double_quant else 0
    return (absmax + n * compute_dtype_bytes + rows * out_features * compute_dtype_bytes
            + rows * in_features * (compute_dtype_bytes - adapter_input_bytes))


def backward_gemm_bytes(*, in_features: int, out_features: int, rows: int, compute_dtype_bytes: int,
                        double_quant: bool = True, adapter_input_bytes: int = 0) -> float:
    """Bytes live at one ``Linear4bit``'s backward GEMM beyond the layer's saved activations: the output's gradient
    (``rows × out``), the fp32 absmax (double quantization only), the weight dequantised to the model dtype and the
    input's gradient it makes (``rows × in``). With an adapter (``adapter_input_bytes`` > 0), whose branch was
    recorded after the base GEMM and so runs first in backward: its input gradient (``rows × in``, compute dtype)
    waits to be summed with the base's, and its saved input copy is already freed."""
    n = in_features * out_features
    absmax = _absmax_fp32_bytes(n) if double_quant else 0
    adapter = rows * in_features * (compute_dtype_bytes - adapter_input_bytes) if adapter_input_bytes else 0
    return (rows * out_features * compute_dtype_bytes + absmax + n * compute_dtype_bytes
            + rows * in_features * compute_dtype_bytes + adapter)


def layer_moments(spec: ModelSpec, *, rows: int, compute_dtype_bytes: int, double_quant: bool = True,
                  adapted: frozenset[str] = frozenset(), adapter_dtype_bytes: int = 4) -> tuple[float, float]:
    """(forward, backward) moments of a decoder layer's MLP output projection (``in`` the intermediate size, ``out``
    the hidden size; the largest linear when no group has that shape): the last 4-bit GEMM of the layer's forward,
    when all the layer saves but that projection's adapter input is there, and the first of its backward, before
    any saved tensor but its adapter's is freed. The gate/up projections have as many weights but their forward
    runs before the MLP has saved anything, and their backward after its activation function and the output
    projection have freed theirs; the attention projections are smaller. ``rows``: one micro-batch's tokens;
    ``adapted``: names of the linear groups the adapter wraps (``memory.lora.targeted_groups``)."""
    groups = [g for g in linear_groups(spec) if not g.is_fused_experts and not g.routed]
    if not groups:
        return 0.0, 0.0
    down = [g for g in groups if g.in_features == spec.intermediate_size and g.out_features == spec.hidden_size]
    g = down[0] if down else max(groups, key=lambda x: x.in_features * x.out_features)
    kw = dict(in_features=g.in_features, out_features=g.out_features, rows=rows,
              compute_dtype_bytes=compute_dtype_bytes, double_quant=double_quant,
              adapter_input_bytes=adapter_dtype_bytes if g.name in adapted else 0)
    return forward_gemm_bytes(**kw), backward_gemm_bytes(**kw)
