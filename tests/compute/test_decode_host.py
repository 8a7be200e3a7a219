"""The decode step's host work: the engine core's part is serial with the GPU in both engine modes, the frontend's
only in-process (``decode_step`` module docstring)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute import generation as gen
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def _common(spec=LLAMA8):
    return {"spec": spec, "matmul_params": matmul_params(spec), "rates": H100, "tp": 1,
            "weight_bytes": total_params(spec) * 2.0, "kv_bytes_per_token": 2.0 * spec.num_layers * spec.kv_dim * 2}


def _gpu(s: ds.DecodeStep) -> float:
    return max(max(s.bandwidth_s + s.kernel_gaps_s, s.compute_s) + s.comm_s, s.launch_s)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 512), core_seq_us=st.floats(0.0, 100.0), multiprocess=st.booleans())
def test_the_engine_core_adds_its_per_sequence_work_in_both_modes(batch, core_seq_us, multiprocess):
    common = _common()
    base = ds.decode_step_seconds(batch=batch, context_tokens=batch * 1000, engine_multiprocess=multiprocess,
                                  engine_s_per_sequence=0.0, **common)
    core = ds.decode_step_seconds(batch=batch, context_tokens=batch * 1000, engine_multiprocess=multiprocess,
                                  engine_s_per_sequence=core_seq_us * 1e-6, **common)
    assert core.engine_s == pytest.approx(ds.ENGINE_S_PER_STEP + batch * core_seq_us * 1e-6)
    gpu_side = _gpu(core) + core.engine_s
    if multiprocess:  # the frontend overlaps: the step is the longer of the core-bound GPU step and the frontend
        assert core.total_s == pytest.approx(max(gpu_side, core.frontend_s))
    else:  # in-process: everything adds
        assert core.total_s == pytest.approx(gpu_side + core.frontend_s)
        assert core.total_s - base.total_s == pytest.approx(batch * core_seq_us * 1e-6)
    assert core.total_s >= base.total_s


def test_a_multiprocess_engine_hides_only_the_frontend():
    """At 64 sequences (GPU step well above the frontend's 64 x per-sequence work) the two modes differ by the
    frontend alone; the engine core's work is in both."""
    common = _common()
    mp = ds.decode_step_seconds(batch=64, context_tokens=64 * 2000, **common)
    inproc = ds.decode_step_seconds(batch=64, context_tokens=64 * 2000, engine_multiprocess=False, **common)
    assert mp.engine_s == inproc.engine_s == pytest.approx(ds.ENGINE_S_PER_STEP + 64 * ds.ENGINE_S_PER_SEQUENCE)
    assert mp.total_s == pytest.approx(_gpu(mp) + mp.engine_s)
    assert inproc.total_s - mp.total_s == pytest.approx(ds.FRONTEND_S_PER_STEP + 64 * ds.FRONTEND_S_PER_SEQUENCE)


def test_host_constants_come_from_the_rates():
    """A constant left None is the rates' field of that name (what a calibration file sets per GPU kind); the
    defaults are the module constants."""
    assert (H100.engine_s_per_step, H100.engine_s_per_sequence, H100.frontend_s_per_step, H100.frontend_s_per_sequence) \
        == (ds.ENGINE_S_PER_STEP, ds.ENGINE_S_PER_SEQUENCE, ds.FRONTEND_S_PER_STEP, ds.FRONTEND_S_PER_SEQUENCE)
    rates = H100.with_overrides({"engine_s_per_step": 1e-3, "engine_s_per_sequence": 37e-6, "frontend_s_per_step": 3e-3,
                                 "frontend_s_per_sequence": 11e-6, "engine_v0_s_per_sequence": 50e-6}, source="test")
    common = {**_common(), "rates": rates, "cuda_graphs": True, "tp_all_reduce_latency_s": None}
    m = ds._step_model(engine_multiprocess=False, cumulative_outputs=False, **common)
    assert (m.engine, m.engine_seq, m.frontend0, m.frontend_seq) == (1e-3, 37e-6, 3e-3, 11e-6)
    assert ds._step_model(engine_generation="v0", **common).engine_seq == 50e-6
    assert ds._step_model(engine_s_per_sequence=0.0, **common).engine_seq == 0.0


def test_generation_passes_the_engine_core_per_sequence_work():
    args = {**_common(), "max_num_seqs": 64, "prompts": 16, "samples_per_prompt": 8, "prompt_len": 256,
            "response_len_max": 512}
    lo = gen.generation_time(engine_s_per_sequence=0.0, **args)
    hi = gen.generation_time(engine_s_per_sequence=50e-6, **args)
    assert hi.decode_s > lo.decode_s
    assert hi.prefill_s == lo.prefill_s
    assert any("engine core host work" in a and "50 us" in a for a in hi.assumptions)
