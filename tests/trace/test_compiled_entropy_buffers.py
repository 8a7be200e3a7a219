"""verl's compiled entropy (``loss.logprob_entropy``): Inductor holds a logits-shaped fp32 buffer only on its CPU
lowering; the decision it makes for a CUDA tensor leaves per-row buffers only (``memory.logits.VERL_ENTROPY_ROW_BYTES``,
``benchmarks/compiled_entropy_buffers.py``), and reads the bf16 logits four times."""

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compiled_entropy_buffers.py"
pytestmark = [pytest.mark.trace, pytest.mark.slow,
              pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")),
                                 reason="Inductor needs a C++ compiler")]


def _module():
    spec = importlib.util.spec_from_file_location("compiled_entropy_buffers", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row_and_full(bufs: list[str]) -> tuple[list[str], list[str]]:
    """Buffers of one value per row (``(s, 1)`` or ``(s, )``) and of two symbolic sizes (the logits' shape)."""
    full = [b for b in bufs if re.search(r"empty_strided_cpu\(\(s\d+, s\d+\)", b)]
    return [b for b in bufs if b not in full], full


def test_cpu_lowering_realizes_the_exp_and_the_cuda_decision_does_not():
    mod = _module()
    cpu_bufs, cpu_reads, cpu_err = mod.generated(False)
    gpu_bufs, gpu_reads, gpu_err = mod.generated(True)
    _, cpu_full = _row_and_full(cpu_bufs)
    gpu_rows, gpu_full = _row_and_full(gpu_bufs)
    assert len(cpu_full) == 1 and "float32" in cpu_full[0]  # the 4 B per logit the CPU lowering holds
    assert gpu_full == []
    # four fp32 rows and the bf16 entropy: VERL_ENTROPY_ROW_BYTES
    from trainfit.memory.logits import VERL_ENTROPY_ROW_BYTES

    row_bytes = sum(4 if "float32" in b else 2 for b in gpu_rows)
    assert row_bytes == VERL_ENTROPY_ROW_BYTES
    assert gpu_reads == cpu_reads == 4
    assert gpu_err == pytest.approx(cpu_err, abs=1e-3) and gpu_err < 0.05
