"""The backward of a LoRA card's ``lora.modules_to_save`` copies (``compute.inventory.Adapter.saved_head`` /
``saved_embedding``): PEFT trains a full copy of each named module (peft 0.13.2 peft/utils/other.py l.242-263), so a
saved head adds the head's weight-gradient GEMM and a saved embedding its dense gradient, as a full fine-tune's head
and embedding do; a plain adapter adds neither."""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import EMBED_BACKWARD_BYTES_PER_WEIGHT, Adapter, step_inventory

SPEC = from_catalog("meta-llama/Llama-3.1-8B")


def _head(adapter: Adapter | None):
    return step_inventory(SPEC, micro_batch_size=2, seq_len=1024, adapter=adapter).head_backward


def test_saved_head_adds_the_weight_gradient_gemm() -> None:
    plain = _head(Adapter(rank=16, targets=("all-linear",)))
    saved = _head(Adapter(rank=16, targets=("all-linear",), saved_head=True))
    assert [g.name for g in plain.gemms] == ["lm_head.dX"]
    assert [g.name for g in saved.gemms] == ["lm_head.dX", "lm_head.dW"]
    assert [g.name for g in _head(None).gemms] == ["lm_head.dX", "lm_head.dW"]


def test_saved_embedding_adds_the_dense_embedding_gradient() -> None:
    plain = _head(Adapter(rank=16, targets=("all-linear",)))
    saved = _head(Adapter(rank=16, targets=("all-linear",), saved_embedding=True))
    assert saved.memory_bytes - plain.memory_bytes == EMBED_BACKWARD_BYTES_PER_WEIGHT * 128_256 * 4_096
    assert saved.kernels - plain.kernels == 1
