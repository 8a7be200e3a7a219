"""Step time: monotonic in GPUs and tokens, LoRA cheaper, PCIe slower than NVLink, decode roofline."""

import dataclasses

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import comm
from trainfit.compute.step_time import (
    DEFAULT_MFU,
    PhaseTime,
    _sum_max_linear,
    generation_time,
    sft_step_time,
    sum_phases,
    weight_sync_seconds,
)
from trainfit.errors import CardError
from trainfit.memory.lora import lora_trainable_params
from trainfit.spec.training import LoraSpec

KV_QWEN3_8B = 36 * 2 * 8 * 128 * 2  # layers x (K, V) x kv heads x head_dim x bf16 bytes


@pytest.fixture(scope="module")
def spec():
    return from_catalog("Qwen/Qwen3-8B")


def _full(spec, **kw):
    args = dict(gpu=resolve_gpu("a100-80gb"), gpus=8, tokens_per_step=8 * 4 * 4096, scope="full", lora_params=0,
                gradient_checkpointing=False, strategy="fsdp", offload="none", seq_len=4096)
    args.update(kw)
    return sft_step_time(spec, **args)


def test_compute_time_is_flops_over_peak_times_default_mfu(spec):
    st = _full(spec, gpus=1, strategy="single")
    peak = resolve_gpu("a100-80gb").bf16_dense_flops_per_s
    assert st.mfu == DEFAULT_MFU == 0.4
    assert st.compute_s == pytest.approx(st.flops_per_token * 8 * 4 * 4096 / (peak * 0.4))
    assert st.comm_s == 0 and st.offload_s == 0 and st.total_s == st.compute_s
    assert any("(default)" in a for a in st.assumptions)
    assert _full(spec, mfu=0.2).compute_s == pytest.approx(2 * _full(spec).compute_s)


def test_more_gpus_less_compute_time(spec):
    times = [_full(spec, gpus=n).compute_s for n in (1, 2, 4, 8, 16)]
    assert times == sorted(times, reverse=True)
    assert times[0] == pytest.approx(16 * times[-1])


def test_more_tokens_more_time(spec):
    totals = [_full(spec, tokens_per_step=t).total_s for t in (4096, 65536, 1 << 20)]
    assert totals == sorted(totals)
    assert totals[0] < totals[1] < totals[2]


def test_lora_compute_below_full(spec):
    n_lora = lora_trainable_params(spec, LoraSpec(rank=16))
    lora = _full(spec, scope="lora", lora_params=n_lora)
    full = _full(spec)
    assert lora.compute_s < full.compute_s
    assert lora.comm_s < full.comm_s  # gradients of the adapter only
    with pytest.raises(CardError):
        _full(spec, scope="lora", lora_params=0)


def test_checkpointing_costs_a_third_more_compute(spec):
    assert _full(spec, gradient_checkpointing=True).compute_s > _full(spec).compute_s * 1.3


def test_pcie_comm_slower_than_nvlink_same_plan(spec):
    nvlink = resolve_gpu("a100-80gb")
    pcie = dataclasses.replace(nvlink, id="a100-no-nvlink", nvlink=False, nvlink_bytes_per_s=None)
    a = _full(spec, gpu=nvlink)
    b = _full(spec, gpu=pcie)
    assert b.comm_s > a.comm_s * 5
    assert b.compute_s == a.compute_s
    assert comm.intra_node_bytes_per_s(resolve_gpu("rtx4090")) == 32e9  # no NVLink on the 4090
    # crossing nodes drops the ring to the inter-node link
    assert _full(spec, inter_node=True).comm_s > a.comm_s


def test_fsdp_volume_is_three_times_ddp_at_one_micro_step(spec):
    fsdp = _full(spec, strategy="fsdp")
    ddp = _full(spec, strategy="ddp")
    assert fsdp.comm_s == pytest.approx(1.5 * ddp.comm_s)  # (2P + G)(n-1)/n vs 2G(n-1)/n, P = G bytes
    assert _full(spec, strategy="fsdp", micro_steps=4).comm_s == pytest.approx(4 * fsdp.comm_s)
    assert _full(spec, strategy="ddp", micro_steps=4).comm_s == pytest.approx(ddp.comm_s)


def test_overlap_and_offload(spec):
    serial = _full(spec)
    hidden = _full(spec, overlap=1.0)
    assert hidden.total_s == pytest.approx(max(serial.compute_s, serial.comm_s + serial.offload_s))
    off = _full(spec, offload="optimizer")
    assert off.offload_s > 0 and off.total_s > serial.total_s
    assert _full(spec, offload="params_and_optimizer").offload_s > off.offload_s
    with pytest.raises(CardError):
        _full(spec, overlap=1.5)


def test_sum_phases():
    assert sum_phases([PhaseTime("generate", 10.0), PhaseTime("train", 5.0), 0.5]) == 15.5


def test_sum_max_linear_matches_a_loop():
    for a1, b1, a2, b2, n in [(1, 0.1, 0.5, 0.3, 50), (2, 0, 1, 0, 7), (0.1, 1, 5, 0.2, 30), (3, 0.5, 0, 1, 1)]:
        assert _sum_max_linear(a1, b1, a2, b2, n) == pytest.approx(sum(max(a1 + b1 * t, a2 + b2 * t) for t in range(n)))


def _gen(spec, gpu="h100-sxm", **kw):
    args = dict(gpu=resolve_gpu(gpu), tp=1, prompts=1, generations=1, prompt_len=512, completion_len=1024,
                weight_bytes=16.4e9, kv_bytes_per_token=KV_QWEN3_8B)
    args.update(kw)
    return generation_time(spec, **args)


def test_decode_bandwidth_bound_at_batch_one(spec):
    g = _gen(spec)
    assert g.bound == "bandwidth"
    h100 = resolve_gpu("h100-sxm")
    assert g.first_step_bandwidth_s == pytest.approx((16.4e9 + 512 * KV_QWEN3_8B) / h100.hbm_bytes_per_s)
    assert g.first_step_compute_s < g.first_step_bandwidth_s / 50


def test_decode_compute_bound_at_large_batch_and_the_crossover_exists(spec):
    assert _gen(spec, prompts=4096, prompt_len=16, completion_len=16).bound == "compute"
    bounds = [_gen(spec, prompts=b, prompt_len=16, completion_len=16).bound for b in (1, 8, 64, 512, 4096)]
    assert bounds[0] == "bandwidth" and bounds[-1] == "compute"
    # per-token cost falls with batch while bandwidth-bound, then flattens
    per_token = [_gen(spec, prompts=b).decode_s / b for b in (1, 16, 256)]
    assert per_token == sorted(per_token, reverse=True)


def test_generation_waves_and_prefix_sharing(spec):
    one = _gen(spec, prompts=8, generations=8)
    waves = _gen(spec, prompts=8, generations=8, max_batch=16)
    assert waves.decode_s > one.decode_s
    assert _gen(spec, prompts=8, generations=8, prefix_sharing=False).prefill_s == pytest.approx(8 * one.prefill_s)
    assert _gen(spec, tp=2).decode_s < _gen(spec).decode_s


def test_weight_sync_over_pcie_slower_than_nvlink():
    w = 16.4e9
    assert weight_sync_seconds(weight_bytes=w, gpu=resolve_gpu("rtx4090"), colocated=False) == pytest.approx(w / 32e9)
    assert weight_sync_seconds(weight_bytes=w, gpu=resolve_gpu("h100-sxm"), colocated=False) < w / 32e9
