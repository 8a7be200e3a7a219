"""Context managers that make a fake-tensor trace match a real run (needs torch + transformers)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def unpacked_batches() -> Iterator[None]:
    """Tell transformers the batch is not packed (GROUND_TRUTH §2, the packed-sequence gotcha).

    Under fake tensors transformers cannot prove a batch is unpacked; it then builds a 4-D mask
    and calls ``repeat_kv`` instead of SDPA's GQA path (+~7% activations). Valid for unpacked
    batches only; the original function is restored on exit.
    """
    import transformers.masking_utils as mu

    orig = mu.find_packed_sequence_indices
    mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = orig


@contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run with ``n`` intra-op threads (fake ops gain nothing from more; 2-core machines thrash)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
