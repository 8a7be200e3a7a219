"""What verl's compiled ``entropy_from_logits`` allocates and reads, on the CPU lowering and on the decision Inductor
makes for a CUDA tensor (a CPU measurement for the memory and time model of ``loss.logprob_entropy``).

verl's old-policy log-prob pass takes the entropy of every packed token's logits with
``torch.compile(entropy_from_logits, dynamic=True)`` (volcengine/verl verl/workers/actor/dp_actor.py l.78-87 and
l.204-207, verl/utils/torch_functional.py l.145-149 @94d681dce4911c3ad6abb011a2d03c62d318868d)::

    pd = torch.nn.functional.softmax(logits, dim=-1)
    entropy = torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)

Inductor decides whether the softmax's ``exp(x - max)`` (read by two reductions) is computed once into a buffer or
recomputed inside each reader in ``StorageBox.should_realize_on_reuse`` (torch 2.13.0, torch/_inductor/ir.py
l.10093-10116): a node with more than one user is realized when it is a CPU node whose inner function uses a "heavy"
op (``exp``, ``log``, ..., the ``is_cpu`` branch, l.10099-10112), when its inner function is large
(``has_large_inner_fn``) or when it reads more than ``realize_reads_threshold`` (4) inputs. Only the first branch
fires here, and only on the CPU. This script compiles the function on bf16 logits twice: as is (the CPU lowering),
and with ``is_cpu`` answering False inside that heuristic (the decision for a CUDA tensor; the rest of the CPU
code generator unchanged), and prints every buffer of the generated code and the loop nests that read the logits.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/compiled_entropy_buffers.py`` (needs a C++ compiler for Inductor).
Measured 2026-12-03, torch 2.13.0+cpu, 300 x 1000 bf16 logits, caches off:

    cpu lowering   buffers: four fp32 [T, 1] / [T] rows, one fp32 [T, V] (the realized exp), bf16 [T] output;
                   the logits read by 4 loop nests, the fp32 [T, V] buffer written once and read once
    cuda decision  buffers: four fp32 [T, 1] / [T] rows, bf16 [T] output (nothing of the logits' shape);
                   the logits read by 4 loop nests

So on a GPU the compiled entropy holds per-row buffers only (4 x 4 B fp32 + 2 B bf16 output per token) beside the
logits it reads, and its traffic is four reads of the bf16 logits (8 B per logit), not 16 B. Not emulated: Triton's
online softmax (``prepare_softmax_online``, matched for cuda / xpu tensors only, torch 2.13.0
torch/_inductor/fx_passes/post_grad.py l.470-479), which may merge the softmax's max and sum passes (fewer reads, no
new buffer of the logits' shape).
"""

from __future__ import annotations

import re

import torch
from torch._inductor import ir
from torch._inductor.utils import run_and_get_code


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """verl/utils/torch_functional.py l.145-149 @94d681dce4911c3ad6abb011a2d03c62d318868d."""
    pd = torch.nn.functional.softmax(logits, dim=-1)
    entropy = torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)
    return entropy


def generated(cuda_decision: bool, *, tokens: int = 300, vocab: int = 1000) -> tuple[list[str], int, float]:
    """(buffer allocations, loop nests reading the logits, max abs error vs fp32 eager) of the compiled function."""
    original = ir.StorageBox.should_realize_on_reuse

    def on_cuda(self, users, *, graph_reuse=True):
        saved = ir.is_cpu
        ir.is_cpu = lambda x: False
        try:
            return original(self, users, graph_reuse=graph_reuse)
        finally:
            ir.is_cpu = saved

    if cuda_decision:
        ir.StorageBox.should_realize_on_reuse = on_cuda
    try:
        torch._dynamo.reset()
        # caches off: a cached graph would not know which decision compiled it
        torch.manual_seed(0)
        x = torch.randn(tokens, vocab, dtype=torch.bfloat16)
        with torch.compiler.config.patch(force_disable_caches=True):
            out, code = run_and_get_code(torch.compile(entropy_from_logits, dynamic=True), x)
    finally:
        ir.StorageBox.should_realize_on_reuse = original
    text = "\n".join(code)
    bufs = [m.group(0) for m in re.finditer(r"buf\d+ = empty_strided_cpu\([^\n]*\)", text)]
    # one full-width vector load of the logits per loop nest (the tail's masked load not counted)
    reads = len(re.findall(r"loadu\(in_ptr0 \+ [^\n]*, static_cast<int64_t>\(\d+\)\);", text))
    err = (out.float() - entropy_from_logits(x.float())).abs().max().item()
    return bufs, reads, err


def main() -> None:
    print(f"torch {torch.__version__}")
    for name, flag in (("cpu lowering", False), ("cuda decision", True)):
        bufs, reads, err = generated(flag)
        print(f"{name}: {reads} loop nests read the logits; max abs error {err:.3g}")
        for b in bufs:
            print("   ", b)


if __name__ == "__main__":
    main()
