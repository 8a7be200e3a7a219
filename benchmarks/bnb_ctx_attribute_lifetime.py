"""How long a tensor an autograd Function keeps as a ``ctx`` attribute lives, against one it saves with
``ctx.save_for_backward`` (CPU, no GPU needed; ``trainfit.memory.bnb_saved_input``, "Held across micro-batches").

bitsandbytes' ``MatMul4Bit.forward`` before 0.43.2 stores its input as ``ctx.tensors = (A, B)``
(bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py l.522-523 @a06a0f6a08cb23754b110359a109e069fa97ce9e,
the 0.41.0 tag). The two Functions below differ only in how they keep their input; the input is an intermediate no
other op keeps. After ``loss.backward()``, with ``loss`` still bound (as a loop that rebinds it only at the next
micro-batch), the attribute's input is alive and the ``save_for_backward`` one is freed; dropping ``loss`` frees both.

Under activation checkpointing (``checkpointed``): torch's non-reentrant checkpoint records the first forward's graph,
its saved-tensor hooks replacing only what ``save_for_backward`` stores, so the attribute input of the first forward
stays alive after the forward and after backward while the loss is bound; the reentrant checkpoint's first forward
runs under ``torch.no_grad`` and keeps none, and its recompute's input is freed with the recompute.

Run: ``python benchmarks/bnb_ctx_attribute_lifetime.py`` (torch 2.13.0+cpu prints: attribute input alive after
backward True, after the loss is dropped False; saved input False, False; checkpointed attribute input,
use_reentrant=False: after the forward True, after backward True, dropped False; use_reentrant=True: False, False,
False).
"""

from __future__ import annotations

import gc
import weakref

import torch


class _KeptAsAttribute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, w):  # noqa: ANN001, ANN205 - autograd signature
        ctx.tensors = (a, w)
        return a @ w

    @staticmethod
    def backward(ctx, g):  # noqa: ANN001, ANN205
        _, w = ctx.tensors
        return g @ w.t(), None


class _SavedForBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, w):  # noqa: ANN001, ANN205
        ctx.save_for_backward(a, w)
        return a @ w

    @staticmethod
    def backward(ctx, g):  # noqa: ANN001, ANN205
        _, w = ctx.saved_tensors
        return g @ w.t(), None


def lifetime(fn: type[torch.autograd.Function]) -> tuple[bool, bool]:
    """(input alive after backward with the loss bound, input alive once the loss is dropped)."""
    x = torch.randn(4, 8, requires_grad=True)
    a = x * 2.0
    ref = weakref.ref(a)
    loss = fn.apply(a, torch.randn(8, 8)).sum()
    del a
    loss.backward()
    gc.collect()
    after_backward = ref() is not None
    del loss
    gc.collect()
    return after_backward, ref() is not None


def checkpointed(*, reentrant: bool) -> tuple[bool, bool, bool]:
    """The first forward's attribute input under ``torch.utils.checkpoint.checkpoint(use_reentrant=reentrant)``:
    (alive after the forward, alive after backward with the loss bound, alive once the loss is dropped)."""
    from torch.utils.checkpoint import checkpoint

    w = torch.randn(8, 8)
    refs: list[weakref.ref] = []

    def layer(x: torch.Tensor) -> torch.Tensor:
        a = x * 2.0  # a fresh tensor, the linear's input
        refs.append(weakref.ref(a))
        return _KeptAsAttribute.apply(a, w)

    loss = checkpoint(layer, torch.randn(4, 8, requires_grad=True), use_reentrant=reentrant).sum()
    gc.collect()
    after_forward = refs[0]() is not None
    loss.backward()
    gc.collect()
    after_backward = refs[0]() is not None
    del loss
    gc.collect()
    return after_forward, after_backward, refs[0]() is not None


def main() -> None:
    for fn in (_KeptAsAttribute, _SavedForBackward):
        bound, dropped = lifetime(fn)
        print(f"{fn.__name__}: alive after backward (loss bound) {bound}; after the loss is dropped {dropped}"
              f" (torch {torch.__version__})")
    for reentrant in (False, True):
        fwd, bwd, dropped = checkpointed(reentrant=reentrant)
        print(f"checkpointed attribute input, use_reentrant={reentrant}: alive after the forward {fwd}; after backward"
              f" (loss bound) {bwd}; after the loss is dropped {dropped}")


if __name__ == "__main__":
    main()
