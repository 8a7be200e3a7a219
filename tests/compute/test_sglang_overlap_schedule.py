"""SGLang's decode step (``decode_step`` module docstring, "SGLang's overlap scheduler" and "CUDA graph batch
limit"): the overlap scheduler hides the per-step host work and the launch behind the device, the per-sequence
constant stays serial; a batch above the release's largest captured CUDA graph runs eagerly."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.memory.weights import total_params
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import sglang_release, sglang_scheduler_inputs
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
COMMON = {"spec": LLAMA8, "matmul_params": matmul_params(LLAMA8), "rates": H100, "tp": 1,
          "weight_bytes": total_params(LLAMA8) * 2.0,
          "kv_bytes_per_token": 2.0 * LLAMA8.num_layers * LLAMA8.kv_dim * 2}


@settings(max_examples=40, deadline=None)
@given(device_s=st.floats(0, 0.1), launch_s=st.floats(0, 0.05), host_s=st.floats(0, 0.05),
       serial_s=st.floats(0, 0.1))
def test_overlap_takes_the_slower_side_and_never_exceeds_the_serial_step(device_s, launch_s, host_s, serial_s):
    ov = ds.overlap_schedule_step_seconds(device_s=device_s, launch_s=launch_s, host_s=host_s, serial_s=serial_s)
    ser = ds.serial_schedule_step_seconds(device_s=device_s, launch_s=launch_s, host_s=host_s + serial_s)
    assert ov == pytest.approx(max(device_s, launch_s + host_s) + serial_s)
    assert ser == pytest.approx(max(device_s, launch_s) + host_s + serial_s)
    assert ov <= ser + 1e-12
    # what the overlap saves is at most the hidden host work
    assert ser - ov <= host_s + 1e-12


@pytest.mark.parametrize("batch", [1, 64, 256])
def test_a_graphed_step_hides_the_per_step_host_work_and_keeps_the_per_sequence_part(batch):
    ser = ds.decode_step_seconds(batch=batch, context_tokens=batch * 1000, **COMMON)
    ov = ds.decode_step_seconds(batch=batch, context_tokens=batch * 1000, overlap_schedule=True, **COMMON)
    device = max(ov.bandwidth_s + ov.kernel_gaps_s, ov.compute_s) + ov.comm_s
    assert device > ov.launch_s + ds.ENGINE_S_PER_STEP  # graphed: the host's per-step work hides entirely
    assert ser.total_s - ov.total_s == pytest.approx(ds.ENGINE_S_PER_STEP)
    assert ov.engine_s == ser.engine_s == pytest.approx(ds.ENGINE_S_PER_STEP + batch * ds.ENGINE_S_PER_SEQUENCE)


def test_a_host_bound_eager_step_gains_only_what_the_device_covers():
    """Eager at 256 sequences: the launch (kernels x 65 us, the training-forward price, set here: a dense model's
    default is now the engine's measured one) plus the per-step work exceed the device step, so the overlap saves the
    device time the serial step had added, not the host work."""
    kw = dict(batch=256, context_tokens=256 * 1000, cuda_graphs=False,
              eager_s_per_kernel=H100.host_s_per_forward_kernel, **COMMON)
    ser, ov = ds.decode_step_seconds(**kw), ds.decode_step_seconds(overlap_schedule=True, **kw)
    device = max(ov.bandwidth_s, ov.compute_s) + ov.comm_s
    assert ov.launch_s + ds.ENGINE_S_PER_STEP > device
    assert ov.total_s == pytest.approx(ov.launch_s + ov.engine_s)
    assert ser.total_s == pytest.approx(max(device, ser.launch_s) + ser.engine_s)


def test_a_batch_above_the_graph_limit_launches_eagerly():
    kernels = ds.decode_kernels(LLAMA8, tp=1)
    small = ds.decode_step_seconds(batch=160, context_tokens=160 * 1000, cuda_graph_max_batch=160, **COMMON)
    large = ds.decode_step_seconds(batch=161, context_tokens=161 * 1000, cuda_graph_max_batch=160, **COMMON)
    free = ds.decode_step_seconds(batch=161, context_tokens=161 * 1000, **COMMON)
    assert small.launch_s == pytest.approx(H100.host_s_per_forward_kernel) and small.kernel_gaps_s > 0
    eager_price = ds.eager_s_per_kernel_of(H100, spec=LLAMA8)  # the default eager price of a dense model
    assert large.launch_s == pytest.approx(kernels * eager_price) and large.kernel_gaps_s == small.kernel_gaps_s
    assert free.launch_s == small.launch_s and large.total_s >= free.total_s
    # the limit is only read with CUDA graphs
    eager = ds.decode_step_seconds(batch=8, context_tokens=8000, cuda_graphs=False, cuda_graph_max_batch=4, **COMMON)
    assert eager.launch_s == pytest.approx(kernels * eager_price)


@pytest.mark.parametrize("release, gpu_memory_mib, tp, expected", [
    (None, 81_559, 1, None),
    ((0, 3, 6), 81_559, 1, None),  # before 0.4.0: not read
    ((0, 3, 6), 24_564, 1, None),
    ((0, 4, 0), 81_559, 1, 160),  # H800 / H100 80 GB: 0.4.0.post2 server_args.py l.189-198
    ((0, 4, 0), 24_564, 1, 8),
    ((0, 4, 0), 24_564, 4, 80),
    ((0, 4, 4), 32_607, 2, 160),  # above 0.4.4's 25,000 MiB threshold
    ((0, 4, 8), 32_607, 2, 8),    # below 0.4.8's 35 GiB
    ((0, 4, 8), 81_559, 8, 160),
    ((0, 5, 2), 143_771, 1, 256),  # H200: the capture list grows to 256 above 90 GiB
    ((0, 5, 2), 183_359, 1, 512),  # B200
    ((0, 5, 3), 81_559, 1, None),
    ((0, 5, 4), 81_559, 2, 256),
    ((0, 5, 6), 81_559, 4, 512),
    ((0, 5, 6), 183_359, 1, 512),
    ((0, 5, 6), 46_068, 1, None),
])
def test_sglang_cuda_graph_max_batch_by_release(release, gpu_memory_mib, tp, expected):
    assert ds.sglang_cuda_graph_max_batch(release=release, gpu_memory_mib=gpu_memory_mib, tp=tp) == expected


@pytest.mark.parametrize("pin, release", [("0.4.0.post2", (0, 4, 0)), ("v0.5.6.post2", (0, 5, 6)),
                                          ("==0.5.4", (0, 5, 4)), ("0.4", (0, 4, 0)), ("main", None),
                                          ("0a3f9c1", None), ("<0.5", None), (None, None)])
def test_sglang_release_reads_release_pins_only(pin, release):
    assert sglang_release(pin) == release


BASE = dict(model="Qwen/Qwen2.5-1.5B", method="grpo", preset="verl",
            hardware={"gpu": "h100-sxm", "gpus_per_node": 8}, parallel={"strategy": "fsdp"},
            rollout={"engine": "sglang", "gpu_memory_utilization": 0.5, "tensor_parallel": 1,
                     "prompts_per_step": 64, "num_generations": 8, "response_len": 4096})


def _card(software=None, **ro):
    c = copy.deepcopy(BASE)
    c["rollout"].update(ro)
    if software:
        c["software"] = software
    return load_card_dict(c)


def _generation_s(card) -> float:
    return next(ph.seconds for ph in make_plan(card).time.phases if ph.name == "generation")


def test_an_sglang_card_with_the_overlap_is_faster_by_at_most_the_hidden_host_work():
    on, off = _card(), _card(sglang_overlap_schedule=False)
    assert sglang_scheduler_inputs(on, resolve_gpu("h100-sxm"))["overlap_schedule"] is True
    assert sglang_scheduler_inputs(off, resolve_gpu("h100-sxm"))["overlap_schedule"] is False
    g_on, g_off = _generation_s(on), _generation_s(off)
    assert g_on < g_off
    # graphed decode on an H100, 64 sequences per engine all running at once: the overlap hides the per-step host
    # constant of every decode step and nothing more, and the engine steps until its longest response is done
    assert g_off - g_on == pytest.approx(ds.ENGINE_S_PER_STEP * BASE["rollout"]["response_len"], rel=1e-3)


def test_a_vllm_card_keeps_its_serial_host_work():
    card = _card(engine="vllm")
    assert sglang_scheduler_inputs(card, resolve_gpu("h100-sxm")) == {}


def test_the_release_pin_limits_the_graphed_batches():
    # 512 prompts x 8 over 8 one-GPU engines: 512 sequences per engine, up to 512 running
    pinned = _card(software={"sglang": "0.4.0.post2"}, max_num_seqs=512, prompts_per_step=512)
    unpinned = _card(max_num_seqs=512, prompts_per_step=512)  # the newest release read, 0.5.6: 256 on an H100
    branch = _card(software={"sglang": "main"}, max_num_seqs=512, prompts_per_step=512)  # not read: no limit
    gpu = resolve_gpu("h100-sxm")
    assert sglang_scheduler_inputs(pinned, gpu)["cuda_graph_max_batch"] == 160
    assert sglang_scheduler_inputs(unpinned, gpu)["cuda_graph_max_batch"] == 256
    assert sglang_scheduler_inputs(branch, gpu)["cuda_graph_max_batch"] is None
    # steps above 160 (256) sequences launch every kernel
    assert _generation_s(pinned) > _generation_s(unpinned) > _generation_s(branch)


@pytest.mark.parametrize("engine", ["vllm", "hf"])
def test_the_overlap_switch_is_refused_on_another_engine(engine):
    with pytest.raises(CardError) as err:
        _card(engine=engine, sglang_overlap_schedule=True)
    msg = str(err.value)
    assert "sglang_overlap_schedule" in msg and engine in msg and "\n" not in msg.strip()


@pytest.mark.parametrize("pin", ["0.4.0" + "1" * 24 + "!", "0.4.0" + ".1" * 2000 + "!",
                                 "0.4.0" + ".post" * 2000 + "!", "0.4.0" + "post1" * 2000 + "!"])
def test_sglang_release_rejects_a_long_malformed_pin_in_linear_time(pin):
    """A pin that does not match fails at once: no repetition of the suffix can match the empty string or split a
    run of digits two ways (the earlier pattern took 35 s on the first pin)."""
    import time

    start = time.perf_counter()
    assert sglang_release(pin) is None
    assert time.perf_counter() - start < 0.5


def test_the_overlap_default_follows_the_pinned_release():
    """On by default from 0.3.6 (server_args.py of the 0.3.6 wheel; 0.3.5 has it off unless asked)."""
    gpu = resolve_gpu("h100-sxm")
    assert sglang_scheduler_inputs(_card({"sglang": "0.3.5"}), gpu)["overlap_schedule"] is False
    assert sglang_scheduler_inputs(_card({"sglang": "0.3.6"}), gpu)["overlap_schedule"] is True
    assert sglang_scheduler_inputs(_card({"sglang": "0.4.0.post2"}), gpu)["overlap_schedule"] is True
    assert sglang_scheduler_inputs(_card({"sglang": "main"}), gpu)["overlap_schedule"] is True
    assert sglang_scheduler_inputs(_card(), gpu)["overlap_schedule"] is True
    # the card's own setting wins either way
    assert sglang_scheduler_inputs(_card({"sglang": "0.3.5"}, sglang_overlap_schedule=True), gpu)[
        "overlap_schedule"] is True


def test_an_unpinned_card_gets_the_newest_release_reads_graph_limit():
    from trainfit.plan.rl_generation import SGLANG_NEWEST_RELEASE_READ

    gpu = resolve_gpu("h100-sxm")
    newest = ds.sglang_cuda_graph_max_batch(release=SGLANG_NEWEST_RELEASE_READ, gpu_memory_mib=gpu.memory_bytes / 2**20,
                                            tp=1)
    assert newest == 256
    assert sglang_scheduler_inputs(_card(), gpu)["cuda_graph_max_batch"] == newest
    assert sglang_scheduler_inputs(_card({"sglang": "main"}), gpu)["cuda_graph_max_batch"] is None
    assert sglang_scheduler_inputs(_card({"sglang": "0.3.5"}), gpu)["cuda_graph_max_batch"] is None


def test_the_bound_under_the_overlap_races_only_the_per_step_host_work():
    """At 256 graphed sequences the per-sequence constant (256 x ENGINE_S_PER_SEQUENCE) exceeds the device step, but
    under the overlap it is added after the race, which the weight stream wins: bandwidth, not launch."""
    kw = {k: v for k, v in COMMON.items()}
    b, t = 256, 256 * 100
    ov = ds._step_model(cuda_graphs=True, overlap_schedule=True, tp_all_reduce_latency_s=0.0, **kw)
    ser = ds._step_model(cuda_graphs=True, overlap_schedule=False, tp_all_reduce_latency_s=0.0, **kw)
    bw, fl, _, ln = ov.parts(b, t)
    assert bw + ov.gaps_s(b) > max(fl, ln + ov.engine) and ln + ov.core(b) > bw + ov.gaps_s(b)
    assert ds._BOUNDS[ds._bound(ov, b, t)] == "bandwidth"
    assert ds._BOUNDS[ds._bound(ser, b, t)] == "launch"
