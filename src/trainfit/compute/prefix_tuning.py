"""PEFT prefix tuning's own memory-bound work in a training step (``Scope.PREFIX_TUNING``).

Read from huggingface/peft @d787f51bbaa196862733ed53c1b7def75b49ab29 (the commit PEFT's MetaMathQA result files
name), ``prefix_projection`` False (PEFT's default; the projection MLP is not modelled):

* ``PeftModel.get_prompt`` (src/peft/peft_model.py l.775-808), once per forward: ``prompt_encoder(prompt_tokens)``
  is an ``nn.Embedding(n, layers * 2 * token_dim)`` lookup (src/peft/tuners/prefix_tuning/model.py l.77, l.86) of
  the ``n`` rows for every batch row, fp32 (the embedding is created in torch's default dtype); ``.to(model dtype)``
  (l.795-796) casts it; ``view`` / ``permute`` / ``split`` (l.797-808) are views. Backward: the split's gradient is
  one ``cat`` of the per-layer key / value gradients, the ``view`` of the permuted gradient a ``reshape`` copy, the
  cast's gradient a cast back to fp32, and the embedding's backward one dense gradient kernel (counted as one
  kernel, as ``inventory``'s token-embedding backward).
* ``DynamicCache`` built from the per-layer tuples stores each layer's prefix key and value through its ``update``,
  whose first call concatenates them onto an empty tensor: two ``cat`` kernels a layer copying ``n`` rows of
  ``kv_dim``. Each layer's own cache update then concatenates the prefix before the new keys / values: two more
  ``cat`` kernels reading and writing ``n + s`` rows. Their backward hands out slices (views, no kernel).

Checked op by op (``tests/compute/test_prefix_tuning.py``: a 3-layer llama in bf16 under PEFT's
``PrefixTuningConfig`` on CPU, torch 2.13.0, transformers 5.24.0, peft 0.21.2, every aten op counted with a
``TorchDispatchMode``): forward one ``embedding`` and one ``_to_copy`` of the ``b x n x layers·2·kv`` prefix and four
``cat`` a layer on the ``(b, kv_heads, n | n + s, head_dim)`` keys / values; backward one ``cat`` of the split's
gradients, one ``clone`` (the reshape of the permuted gradient), one ``_to_copy`` to fp32 and one
``embedding_dense_backward``. Not counted here, as for any masked SDPA layer (``plan.time.sdpa_mask_layers``): the
``repeat_kv`` copies of the ``n + s`` keys and values.

The attention itself (``n + s`` keys, SDPA with the materialised mask) is ``inventory.step_inventory``'s, with
``Adapter.prefix_tokens``. Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

FP32_BYTES = 4.0
PREFIX_FORWARD_ENCODER_KERNELS = 2
"""The embedding lookup and the cast to the model dtype: ``prompt_encoder(prompt_tokens)`` and
``past_key_values.to(self.base_model_torch_dtype)``, huggingface/peft peft/peft_model.py (the repository's
src/peft/peft_model.py) l.794-796 @d787f51bbaa196862733ed53c1b7def75b49ab29 (the rest of ``get_prompt``, l.797-808,
views)."""
PREFIX_BACKWARD_ENCODER_KERNELS = 4
"""The split's ``cat``, the ``reshape`` copy of the permuted gradient (``view`` of a ``permute``), the cast to fp32,
the embedding's dense gradient: the backward of huggingface/peft peft/peft_model.py l.794-808
@d787f51bbaa196862733ed53c1b7def75b49ab29, counted op by op in the module docstring's trace."""
PREFIX_CAT_KERNELS_PER_LAYER = 4
"""The key's and the value's ``torch.cat`` when the cache stores the prefix (``DynamicLayer.lazy_initialization``
makes empty tensors, ``update`` concatenates onto them), and again in the layer's own cache update:
transformers/cache_utils.py l.113-136 of the transformers 5.24.0 wheel (the one the trace runs)."""


@dataclass(frozen=True, slots=True)
class PrefixWork:
    """Bytes moved and kernels launched by prefix tuning's own ops in one micro-step."""

    forward_bytes: float
    forward_kernels: float
    backward_bytes: float
    backward_kernels: float


def prefix_encoder_work(*, micro_batch_size: int, num_virtual_tokens: int, row_elements: int,
                        dtype_bytes: float) -> PrefixWork:
    """The prefix embedding's lookup, cast and their backward, once per micro-step. ``row_elements``: one virtual
    token's row (``layers x 2 x kv_dim``, ``memory.peft_variants.prefix_row_elements``); ``dtype_bytes``: the model
    dtype's. Forward: the gather reads and writes ``b x n x row`` fp32 elements, the cast reads them and writes the
    model dtype. Backward: the split's ``cat`` and the ``reshape`` copy read and write the model dtype, the cast back
    reads it and writes fp32, the embedding backward reads that and writes the ``n x row`` fp32 weight gradient."""
    elements = float(micro_batch_size * num_virtual_tokens * row_elements)
    a = float(dtype_bytes)
    forward = elements * (2 * FP32_BYTES + FP32_BYTES + a)
    backward = elements * (2 * a + 2 * a + a + FP32_BYTES + FP32_BYTES) + FP32_BYTES * num_virtual_tokens * row_elements
    return PrefixWork(forward, PREFIX_FORWARD_ENCODER_KERNELS, backward, PREFIX_BACKWARD_ENCODER_KERNELS)


def prefix_cat_bytes_per_layer(*, micro_batch_size: int, seq_len: float, num_virtual_tokens: int, kv_dim: int,
                               dtype_bytes: float) -> float:
    """One layer's ``cat`` of its key and value, twice: storing the prefix in the cache (reads and writes ``n`` rows)
    and the layer's cache update (reads the ``n`` prefix and ``s`` new rows, writes ``n + s``), ``kv_dim`` wide in the
    model dtype."""
    rows = num_virtual_tokens + (num_virtual_tokens + seq_len)
    return 2.0 * 2.0 * micro_batch_size * rows * kv_dim * dtype_bytes
