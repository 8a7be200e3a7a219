"""Both DPO tracers run the one DPO step of ``trainfit.trace.dpo_step``, and their traced bytes are the ones they
traced before sharing it.

The golden file (tests/trace/golden/dpo_step_bytes.json, its "source" names the code and commit it was traced with)
holds each phase's peak and breakdown at depths 1 and 2 of the one-GPU tracer (precomputed and live reference,
LoRA, checkpointing, fp32 autocast) and the tensor-parallel one (gathered head, with and without sequence parallel).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import trainfit.trace

TRACE = Path(trainfit.trace.__file__).parent
GOLDEN = json.loads((Path(__file__).parent / "golden" / "dpo_step_bytes.json").read_text())
TRACERS = ("rl_passes", "dpo_tensor_parallel")
SHARED = {"traced_dpo_step", "warm_up_dpo", "start_tracker", "depth_run"}

TINY = dict(model_type="qwen3", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, vocab_size=256, tie_word_embeddings=False)
_ONE_GPU = dict(hf_config=TINY, pass_kind="dpo_step", seq_len=32, micro_batch_size=2)
ONE_GPU = {
    "rl/tiny-pre": _ONE_GPU,
    "rl/tiny-ref": dict(_ONE_GPU, dpo_reference=True),
    "rl/tiny-lora-ref": dict(_ONE_GPU, dpo_reference=True, scope="lora"),
    "rl/tiny-ref-ckpt": dict(_ONE_GPU, dpo_reference=True, gradient_checkpointing=True),
    "rl/tiny-ref-fp32ac": dict(_ONE_GPU, dpo_reference=True, precision="fp32_autocast"),
}
TENSOR_PARALLEL = {  # GridCase("llama", ...) of trainfit.accuracy.grid, live reference or not
    "tp/llama-tp2-s128-pre": (dict(seq_len=128), False),
    "tp/llama-tp2-sp-s128-ref": (dict(sequence_parallel=True, seq_len=128), True),
}


def _calls(module: str) -> tuple[set[str], set[str]]:
    """Names the module imports from ``trainfit.trace.dpo_step``, and the attribute calls and phase names it makes."""
    tree = ast.parse((TRACE / f"{module}.py").read_text())
    imported = {a.name for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "trainfit.trace.dpo_step" for a in n.names}
    made = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            made.add(n.func.attr)
            if n.func.attr == "phase" and n.args and isinstance(n.args[0], ast.Constant):
                made.add(f"phase:{n.args[0].value}")
    return imported, made


@pytest.mark.parametrize("module", TRACERS)
def test_each_dpo_tracer_uses_the_shared_step_and_repeats_none_of_it(module):
    imported, made = _calls(module)
    assert SHARED <= imported, f"{module} imports {sorted(imported)} from trainfit.trace.dpo_step"
    repeated = made & {"backward", "step", "zero_grad", "logsigmoid", "mark_activations", "add_existing",
                       "phase:forward", "phase:ref_logprob", "phase:backward", "phase:optimizer_step"}
    assert not repeated, f"{module} repeats the DPO step's {sorted(repeated)}"


def _noop(label: str, frac: float) -> None:
    pass


def _compare(name: str, runs) -> None:  # noqa: ANN001
    want = GOLDEN["cases"][name]
    got = [{"depth": r.depth, "peaks": r.peaks, "breakdowns": r.breakdowns} for r in runs]
    assert got == want, f"{name}: the traced bytes moved"


@pytest.mark.trace
@pytest.mark.parametrize("name", sorted(ONE_GPU))
def test_one_gpu_dpo_trace_keeps_its_bytes(name):
    pytest.importorskip("torch")
    from trainfit.trace import rl_passes
    from trainfit.trace.api import TraceRequest

    req = TraceRequest(**ONE_GPU[name])
    _compare(name, [rl_passes.run_depth(req, d, window=1, progress=_noop) for d in (1, 2)])


@pytest.mark.trace
@pytest.mark.parametrize("name", sorted(TENSOR_PARALLEL))
def test_tensor_parallel_dpo_trace_keeps_its_bytes(name):
    pytest.importorskip("torch")
    from trainfit.accuracy.grid import GridCase
    from trainfit.trace import dpo_tensor_parallel
    from trainfit.trace.api import TraceRequest

    kw, reference = TENSOR_PARALLEL[name]
    case = GridCase("llama", world_size=2, tensor_parallel=2, **kw)
    req = TraceRequest(**case.trace_kwargs(), pass_kind="dpo_step", dpo_reference=reference)
    _compare(name, [dpo_tensor_parallel.run_depth(req, d, window=1, progress=_noop) for d in (1, 2)])
