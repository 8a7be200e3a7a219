"""The loop nests and the logit-sized traffic of torchtitan's compiled loss (a CPU reading for the time model).

torchtitan's loss is ``F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))``, wrapped in
``torch.compile`` by ``build_cross_entropy_loss`` whenever ``training.compile`` is set (pytorch/torchtitan
torchtitan/components/loss.py l.17-29 @bbb1b616ef4d01b0ea745c13b03c192910a166c9; ``benchmarks/
compiled_ce_saved_bytes.py`` measures what it saves). This script compiles it on bf16 logits, runs forward and
backward, and reads Inductor's generated code (``torch._inductor.utils.run_and_get_code``): per graph, the loop nests
(``#pragma omp for`` / ``#pragma omp single`` blocks of the C++ kernel: on CUDA each is one Triton kernel, or two
for a reduction Inductor splits), the vectorised loads of the logits and the vectorised stores of a logits-sized
tensor (an index ``x1 + V*x0`` over the whole ``[N, V]``; the forward's per-row gather of the label's logit is a
scalar load, not counted).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/compiled_ce_kernels.py`` (needs a C++ compiler for Inductor).
Measured 2026-12-03, torch 2.13.0+cpu, N=512 tokens x V=32000:

    forward   3 loop nests; 2 full reads of the bf16 logits (the row max, then the row sum of exp(x - max)), 0 writes
    backward  2 loop nests; 1 full read of the bf16 logits, 1 full write (the bf16 gradient)

On CPU the max and the sum read each row twice; on CUDA / ROCm Inductor's Triton backend rewrites that pair into one
online-softmax reduction (torch/_inductor/fx_passes/post_grad.py ``prepare_softmax_extra_check``: cuda devices
only), one read (``compute.inventory.COMPILED_CE_FORWARD_BYTES``).
"""

from __future__ import annotations

import re

import torch
from torch._inductor.utils import run_and_get_code


def cross_entropy_loss(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """torchtitan's loss (torchtitan/components/loss.py @bbb1b616ef4d)."""
    return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def count(code: str, *, vocab: int) -> tuple[int, int, int]:
    """(loop nests, full vectorised reads of a [N, V] tensor, full vectorised writes of one) in one generated graph."""
    nests = len(re.findall(r"#pragma omp (?:for|single)\b", code))
    full = f"x1 + {vocab}L*x0"
    reads = sum(1 for line in code.splitlines() if "loadu(" in line and full in line)
    writes = sum(1 for line in code.splitlines() if ".store(" in line and full in line)
    return nests, reads, writes


def main(tokens: int = 512, vocab: int = 32000) -> None:
    torch.manual_seed(0)
    pred = torch.randn(1, tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens))
    fn = torch.compile(cross_entropy_loss)

    def step() -> torch.Tensor:
        loss = fn(pred, labels)
        loss.backward()
        return loss

    _, codes = run_and_get_code(step)
    print(f"torch {torch.__version__}, N={tokens} x V={vocab}")
    for name, code in zip(("forward", "backward"), codes):
        nests, reads, writes = count(code, vocab=vocab)
        print(f"{name:9s} {nests} loop nests; {reads} full reads of the logits, {writes} full writes")


if __name__ == "__main__":
    main()
