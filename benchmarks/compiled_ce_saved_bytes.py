"""What torchtitan's loss keeps for backward, eager vs ``torch.compile``d (a CPU measurement for the memory report).

torchtitan's loss is ``F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))`` and, from
pytorch/torchtitan bbb1b616ef4d01b0ea745c13b03c192910a166c9 (2025-04-02, PR #1033: "Enable compiling the loss
function ... result in reduction of memory"), ``build_cross_entropy_loss`` wraps it in ``torch.compile`` whenever
``training.compile`` is set (torchtitan/components/loss.py l.17-29 there; the same at e7c0cae9, 2c8b5947, 6fc499f6,
the commits of the Trainy H200 and torchao MI300X / B200 runs; not yet at 0da8901b, the torchao H100 run's).

This script runs that function on bf16 logits, eager and compiled, and records every tensor autograd saves for
backward (``torch.autograd.graph.saved_tensors_hooks``): bytes per logit, and the gradient's dtype. The partition
AOTAutograd chooses is device-independent in kind (the same decomposition and min-cut partitioner on CUDA), so the
bytes per logit carry over; the kernels do not.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/compiled_ce_saved_bytes.py`` (needs a C++ compiler for Inductor).
Measured 2026-12-03, torch 2.13.0+cpu, N=512 tokens x V=32000:

    eager     saved 8.00 B/logit: two fp32 [N, V] (log_softmax's output, saved by log_softmax and by nll_loss: one
              storage, 4 B/logit), labels, scalar; gradient bf16 (via an fp32 [N, V] gradient first)
    compiled  saved 2.00 B/logit: the bf16 [1, N, V] input, labels, two fp32 [N, 1] (row max / log-sum-exp), scalar;
              gradient bf16

So the compiled loss keeps no fp32 copy of the logits (eager: a 4 B/logit fp32 log-softmax saved, and 4 B/logit fp32
copy plus 4 B/logit fp32 gradient transient around it), only the 2 B/logit bf16 logits.
"""

from __future__ import annotations

import torch


def cross_entropy_loss(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """torchtitan's loss (torchtitan/components/loss.py @bbb1b616ef4d)."""
    return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def saved_for_backward(fn, *, tokens: int = 512, vocab: int = 32000) -> tuple[list[tuple[tuple[int, ...], str]], float, str]:
    """(shape, dtype) of every tensor saved for backward, bytes per logit, and the gradient's dtype."""
    torch.manual_seed(0)
    pred = torch.randn(1, tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens))
    saved: list[tuple[tuple[int, ...], str, int]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((tuple(t.shape), str(t.dtype), t.numel() * t.element_size()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn(pred, labels)
    loss.backward()
    per_logit = sum(b for _, _, b in saved) / (tokens * vocab)
    return [(s, d) for s, d, _ in saved], per_logit, str(pred.grad.dtype)


def main() -> None:
    print(f"torch {torch.__version__}")
    for name, fn in (("eager", cross_entropy_loss), ("compiled", torch.compile(cross_entropy_loss))):
        shapes, per_logit, grad = saved_for_backward(fn)
        print(f"{name:9s} saved {per_logit:.2f} B/logit {shapes} gradient {grad}")


if __name__ == "__main__":
    main()
