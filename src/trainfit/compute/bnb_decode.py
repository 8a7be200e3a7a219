"""Weight bytes one decode step of a vLLM engine streams when its linears are bitsandbytes 4-bit (NF4).

Unsloth's ``fast_inference`` loads the ``-bnb-4bit`` checkpoint into vLLM with bitsandbytes quantization and builds
the trainer on the engine's tensors (``trainfit.methods.unsloth`` 1.), and patches vLLM's
``BitsAndBytesLinearMethod._apply_4bit_weight`` so that every 4-bit linear calls, for each of its stacked shards
(q / k / v, gate / up), ``matmul_4bit(x, qweight[offsets[i]:offsets[i + 1]].t(), quant_states[i])`` on the step's
``x`` of ``rows`` tokens (unslothai/unsloth-zoo ``unsloth_zoo/vllm_utils.py`` l.80-129 and ``patch_vllm_bitsandbytes``
l.134-138 @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de, the zoo release beside Unsloth 2025.2.4). bitsandbytes before
0.50 then takes one of two paths (``bitsandbytes/autograd/_functions.py`` ``matmul_4bit`` l.512-533 at the 0.45.2 tag,
bitsandbytes-foundation/bitsandbytes@7aec4a88465440b6466a526fe9bbb30930a04ba4; the same test at 0.45.5 l.521, 0.46.0
l.381, 0.49.0 l.389):

* **one row** (``A.numel() == A.shape[-1]``, no grad): ``F.gemv_4bit`` reads the packed weight in place: half a
  byte a weight and its block scales (``GEMV_4BIT_BYTES_PER_WEIGHT``);
* **more rows**: ``MatMul4Bit.forward`` runs ``F.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t())``
  (l.462 at 0.45.2): the whole weight is dequantised to the 16-bit compute dtype (read packed, write 2 bytes:
  ``compute.inventory.NF4_DEQUANT_BYTES_PER_WEIGHT``) and the GEMM reads those 2 bytes again
  (``DEQUANT_GEMM_BYTES_PER_WEIGHT`` in all), every call, so every decode step of two or more running sequences.

A decode step is bandwidth-bound, so a batch of two or more sequences streams about 4.5 bytes a quantized weight,
2.3x the bf16 model and 8.5x the packed one; the last sequence alone streams the packed weight. The parameters the
loader leaves unquantized (embedding, ``lm_head``, norms) stay 16-bit, read once a step in both cases.

bitsandbytes 0.50.0 (2026-07-24) added a fused ``gemm_4bit`` kernel for short row counts, chosen per GPU
(``memory.nf4_dequant`` module docstring); it is not modelled here: ``plan.rl_generation.bnb_engine_inputs`` applies
these bytes to a card pinned before 0.50 only (unpinned or from 0.50 the engine streams the stored packed base:
``plan.rl_generation.BNB_UNPINNED_ASSUMPTION``), and ``hf_peft_inputs`` applies them to transformers' ``generate``
on a bitsandbytes base under the same pin. Not modelled either: the dequantised weight of a small shard staying
in L2 (an upper bound on its re-read), the per-shard dequantise, GEMM and slice-copy kernels' launches and gaps, and
the prefill's one dequantisation a forward (compute-bound there).
"""

from __future__ import annotations

from trainfit.compute.inventory import NF4_DEQUANT_BYTES_PER_WEIGHT

GEMV_4BIT_BYTES_PER_WEIGHT = 0.5 + 1 / 32
"""Bytes ``gemv_4bit`` reads per 4-bit weight for one row: the packed nibble and the block scales, counted as
``compute.inventory.NF4_DEQUANT_BYTES_PER_WEIGHT`` counts the dequantiser's read (``matmul_4bit``'s one-row branch,
bitsandbytes/autograd/_functions.py l.521-531 @7aec4a88465440b6466a526fe9bbb30930a04ba4, the 0.45.2 tag)."""

DEQUANT_GEMM_BYTES_PER_WEIGHT = NF4_DEQUANT_BYTES_PER_WEIGHT + 2.0
"""Bytes a 4-bit weight moves per call of two or more rows before bitsandbytes 0.50: ``dequantize_4bit`` reads it
packed and writes it 16-bit (``NF4_DEQUANT_BYTES_PER_WEIGHT``), then ``F.linear`` reads the 16-bit copy (2)
(``MatMul4Bit.forward``, bitsandbytes/autograd/_functions.py l.462 @7aec4a88465440b6466a526fe9bbb30930a04ba4)."""


def bnb_4bit_step_weight_bytes(*, quantized_weights: float, unquantized_bytes: float, rows: int) -> float:
    """Weight bytes one forward of ``rows`` tokens streams through a model whose ``quantized_weights`` linear weights
    are bitsandbytes 4-bit, before bitsandbytes 0.50 (module docstring): ``GEMV_4BIT_BYTES_PER_WEIGHT`` each for one
    row, ``DEQUANT_GEMM_BYTES_PER_WEIGHT`` each for more, plus the ``unquantized_bytes`` (16-bit) read once."""
    if rows < 1 or quantized_weights < 0 or unquantized_bytes < 0:
        raise ValueError("bnb_4bit_step_weight_bytes: rows >= 1 and non-negative byte counts")
    per_weight = GEMV_4BIT_BYTES_PER_WEIGHT if rows == 1 else DEQUANT_GEMM_BYTES_PER_WEIGHT
    return quantized_weights * per_weight + unquantized_bytes
