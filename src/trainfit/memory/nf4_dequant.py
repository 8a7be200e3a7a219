"""bitsandbytes NF4 (QLoRA) dequantisation temporaries: what one 4-bit linear holds while its GEMM runs.

bitsandbytes 0.50.2 (PyPI wheel, files as installed):

* **Forward** (``MatMul4Bit.forward`` -> ``bitsandbytes::gemm_4bit``, ``autograd/_functions.py`` l.322-346) on CUDA
  runs the unfused ``_dequant_linear_fallback`` (``backends/cuda/ops.py`` l.904-916) for more than 1,536 rows
  (l.922-926, l.954) and for every row count at which ``_gemm_4bit_use_custom_cuda`` (l.584-812) prefers it. That
  choice reads the weight's output width, not its size: ``n_blocks = ceil(out_features / 64)`` (l.604) against the
  GPU's SM count. fp32 inputs (and GPUs before sm75) have no MMA kernel and take the fused one below 8 rows only
  (l.608-609); on sm90 (H100/H200) 16-bit inputs take it up to 64 rows at ``n_blocks >= 3·SMs``, 48 at ``>= 2·SMs``,
  32 at ``>= SMs``, 16 (none for ``in >= out`` below 3/4 of a wave) at ``>= SMs/2`` and never below that
  (l.745-759); sm80 has its own ladder up to 128 rows (l.711-734), sm100 none beyond 32 (l.618-623). The fallback
  holds ``absmax_dq`` (fp32, one per 64-element block) and ``absmax = absmax_dq + offset`` (another) when double
  quantization nests the absmax, and the weight dequantised to the input's dtype, until ``F.linear`` has written its
  output. Short rows on the fused kernel hold none of this: the term is an upper bound there. Releases before 0.50.0
  have no fallback: the forward is ``F.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t())`` (0.49.0 tag
  ``autograd/_functions.py`` l.315), and ``dequantize_4bit`` makes one fp32 absmax and adds the offset in place
  (0.41.1, bitsandbytes-foundation/bitsandbytes@18e827d666fa2b70a12d539ccedc17aa51b2c97c ``bitsandbytes/functional.py``
  l.903-904): ``forward_absmax_copies``.
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

from trainfit.memory.params import linear_groups
from trainfit.memory.quant import nf4_absmax_fp32_bytes
from trainfit.spec.card import pin_before
from trainfit.spec.model import ModelSpec

FALLBACK_SINCE = (0, 50)
"""The first bitsandbytes release whose CUDA forward runs ``_dequant_linear_fallback`` (two fp32 absmax tensors): the
0.50.0 tag's ``bitsandbytes/backends/cuda/ops.py`` l.891-903; the 0.49.0 tag has no such function."""


def forward_absmax_copies(bitsandbytes_version: str | None) -> int:
    """fp32 absmax tensors the forward of a double-quantized weight makes: 1 on a pin before 0.50 (``dequantize_4bit``
    adds the offset in place), else 2 (``absmax_dq`` and ``absmax_dq + offset``). None or a pin naming no release:
    2 (today's releases)."""
    return 1 if bitsandbytes_version and pin_before(bitsandbytes_version, FALLBACK_SINCE) else 2


def forward_gemm_bytes(*, in_features: int, out_features: int, rows: int, compute_dtype_bytes: int,
                       double_quant: bool = True, adapter_input_bytes: int = 0, input_saved: bool = False,
                       absmax_copies: int = 2) -> float:
    """Bytes one ``Linear4bit``'s forward GEMM holds beyond the layer's saved activations, on the unfused CUDA path:
    the fp32 absmax tensors (double quantization only, ``absmax_copies`` of them: ``forward_absmax_copies``; a plain
    absmax is fp32 already and used as it is), the weight dequantised to the compute dtype (``out × in``), the
    output (``rows × out``) and the input (``rows × in``) when nothing saves it; less what an adapter on this linear
    saves of that input (``adapter_input_bytes`` per element: PEFT's fp32 copy for lora_A, made after the base GEMM,
    ``peft/tuners/lora/bnb.py`` l.527, l.546-549) and the layer's saved set already counts: 0 when the forward runs
    without grad (a checkpointed layer's first forward saves nothing). ``input_saved``: MatMul4Bit itself keeps the
    input (bitsandbytes before 0.43.2, ``memory.bnb_saved_input``), so the saved set counts it already; so does an
    adapter in the compute dtype (``adapter_input_bytes == compute_dtype_bytes``: lora_A saves the input itself, no
    copy; PEFT's cast returns it as it is, peft 0.21.2 ``peft/tuners/tuners_utils.py`` l.2233)."""
    n = in_features * out_features
    absmax = absmax_copies * nf4_absmax_fp32_bytes(n) if double_quant else 0
    own = adapter_input_bytes == compute_dtype_bytes  # a compute-dtype adapter saves the input itself, no copy
    counted = compute_dtype_bytes if (input_saved or own) else 0
    pending = adapter_input_bytes if not own else 0
    unsaved_input = rows * in_features * (compute_dtype_bytes - counted - pending)
    return absmax + n * compute_dtype_bytes + rows * out_features * compute_dtype_bytes + unsaved_input


def backward_gemm_bytes(*, in_features: int, out_features: int, rows: int, compute_dtype_bytes: int,
                        double_quant: bool = True, adapter_input_bytes: int = 0) -> float:
    """Bytes live at one ``Linear4bit``'s backward GEMM beyond the layer's saved activations: the output's gradient
    (``rows × out``), the fp32 absmax (double quantization only), the weight dequantised to the model dtype and the
    input's gradient it makes (``rows × in``). With an adapter (``adapter_input_bytes`` > 0), whose branch was
    recorded after the base GEMM and so runs first in backward: its input gradient (``rows × in``, compute dtype)
    waits to be summed with the base's, and its saved input copy is already freed."""
    n = in_features * out_features
    absmax = nf4_absmax_fp32_bytes(n) if double_quant else 0
    adapter = rows * in_features * (compute_dtype_bytes - adapter_input_bytes) if adapter_input_bytes else 0
    return (rows * out_features * compute_dtype_bytes + absmax + n * compute_dtype_bytes
            + rows * in_features * compute_dtype_bytes + adapter)


def layer_moments(spec: ModelSpec, *, rows: int, compute_dtype_bytes: int, double_quant: bool = True,
                  adapted: frozenset[str] = frozenset(), adapter_dtype_bytes: int = 4,
                  bitsandbytes_version: str | None = None, base_saves_input: bool = False,
                  first_forward_holds_input: bool = False) -> tuple[float, float, float]:
    """(forward, forward without grad, backward) moments of a decoder layer's MLP output projection (``in`` the intermediate size, ``out``
    the hidden size; the largest linear when no group has that shape): the last 4-bit GEMM of the layer's forward,
    when all the layer saves but that projection's adapter input is there, and the first of its backward, before
    any saved tensor but its adapter's is freed. The gate/up projections have as many weights but their forward
    runs before the MLP has saved anything, and their backward after its activation function and the output
    projection have freed theirs; the attention projections are smaller. ``rows``: one micro-batch's tokens;
    ``adapted``: names of the linear groups the adapter wraps (``memory.lora.targeted_groups``);
    ``bitsandbytes_version``: the card's ``software.bitsandbytes`` pin (the forward's absmax copies);
    ``base_saves_input``: MatMul4Bit keeps its input and the layer's saved set counts it
    (``memory.bnb_saved_input``). A checkpointed layer's first forward runs without grad: its adapter saves no input
    copy to subtract, and MatMul4Bit keeps nothing (the second moment), unless ``first_forward_holds_input``: a
    non-reentrant checkpoint's first forward records the graph, whose MatMul4Bit nodes keep their inputs, counted
    beside the checkpointed inputs (``memory.bnb_saved_input.ctx_held_input_bytes``)."""
    groups = [g for g in linear_groups(spec) if not g.is_fused_experts and not g.routed]
    if not groups:
        return 0.0, 0.0, 0.0
    down = [g for g in groups if g.in_features == spec.intermediate_size and g.out_features == spec.hidden_size]
    g = down[0] if down else max(groups, key=lambda x: x.in_features * x.out_features)
    kw = dict(in_features=g.in_features, out_features=g.out_features, rows=rows,
              compute_dtype_bytes=compute_dtype_bytes, double_quant=double_quant,
              adapter_input_bytes=adapter_dtype_bytes if g.name in adapted else 0)
    fwd = dict(kw, input_saved=base_saves_input,
               absmax_copies=forward_absmax_copies(bitsandbytes_version))
    return (forward_gemm_bytes(**fwd),
            forward_gemm_bytes(**dict(fwd, adapter_input_bytes=0, input_saved=first_forward_holds_input)),
            backward_gemm_bytes(**kw))
