"""The device gaps between a CUDA-graph decode step's kernels (``decode_step.GRAPH_KERNEL_GAP_S``, module docstring
"Kernel gaps") and ``ENGINE_S_PER_STEP`` re-derived so that the Llama-3.1-8B point that sets it does not move."""
from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))


def _step(spec, *, tp=1, batch=1, cuda_graphs=True, **kw):
    return ds.decode_step_seconds(spec=spec, matmul_params=matmul_params(spec), rates=H100, tp=tp, batch=batch,
                                  context_tokens=batch * 256, weight_bytes=total_params(spec) * 2.0,
                                  kv_bytes_per_token=2.0 * spec.num_layers * spec.kv_dim * 2,
                                  cuda_graphs=cuda_graphs, **kw)


def test_gaps_are_one_per_kernel_outside_the_all_reduces_graphed_or_eager():
    spec = from_catalog("Qwen/Qwen3-32B")
    graphs = _step(spec, tp=4)
    assert graphs.kernel_gaps_s == pytest.approx(
        (ds.decode_kernels(spec, tp=4) - 2 * spec.num_layers) * ds.GRAPH_KERNEL_GAP_S)
    # an eager step crosses the same kernel boundaries; its launch hides them only when it is the slower side
    assert _step(spec, tp=4, cuda_graphs=False).kernel_gaps_s == graphs.kernel_gaps_s


@pytest.mark.parametrize("batch", [1, 64, 256, 1024])
def test_an_eager_step_is_never_faster_than_the_same_step_graphed(batch):
    """At the engines' measured eager price a large dense batch is device-bound; with the gaps on both sides the
    eager step still costs at least the graphed one (it launches more and crosses the same boundaries)."""
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    graphed, eager = _step(spec, batch=batch), _step(spec, batch=batch, cuda_graphs=False)
    assert eager.total_s >= graphed.total_s - 1e-12
    # eager at 256 sequences on an H100: the device, not the launch, sets the step
    if batch >= 256:
        assert eager.bandwidth_s + eager.kernel_gaps_s > eager.launch_s


def test_llama_point_keeps_its_step_the_gaps_come_out_of_the_engine_constant():
    """1.0 ms engine constant before = 0.58 ms now + 320 kernels x 1.3 us (0.416 ms)."""
    llama = from_catalog("meta-llama/Llama-3.1-8B")
    s = _step(llama)
    assert ds.decode_kernels(llama, tp=1) == 320
    assert ds.ENGINE_S_PER_STEP + s.kernel_gaps_s == pytest.approx(1.0e-3, abs=0.01e-3)
    assert s.total_s == pytest.approx(6.48e-3, rel=0.05)


def test_a_model_of_more_kernels_pays_more_at_batch_one(monkeypatch):
    """DeepSeek-V3 at TP 16 (1,379 kernels, 122 of them all-reduces) gains 1,257 x 1.3 us = 1.63 ms of gaps and
    gives back 0.42 ms of the old engine constant: +1.2 ms at batch 1, still well under the published 23.1 ms TP 16
    two-node TPOT (module docstring)."""
    dsv3 = from_catalog("deepseek-ai/DeepSeek-V3")
    now = _step(dsv3, tp=16)
    assert now.kernel_gaps_s == pytest.approx(1257 * 1.3e-6)
    monkeypatch.setattr(ds, "GRAPH_KERNEL_GAP_S", 0.0)
    before = _step(dsv3, tp=16, engine_s_per_step=1.0e-3)
    assert now.total_s - before.total_s == pytest.approx(1257 * 1.3e-6 - 0.42e-3, abs=0.01e-3)
