"""``rollout.weight_transport``: NeMo RL's NCCL reshard refit and MoonshotAI checkpoint-engine's Broadcast update
(``compute.sync.nccl_reshard_seconds`` / ``checkpoint_engine_seconds``), read at NVIDIA-NeMo/RL
@7ea279abfbeb698b092856d0dab61e7cf39bc909 and MoonshotAI/checkpoint-engine @59a3c4ffa2e14c0c26e81f62642e2d3ed68253ab.

The reshard sends the FFN projections shard to shard (each vLLM rank receives exactly its own shard) and the rest by
the packed broadcast; under blockwise fp8 every fp8 weight's ``*_scale_inv`` rides the misc path as its own tensor.
checkpoint-engine copies the host-resident checkpoint to the GPUs in buckets, broadcasts each to every engine rank
and lets vLLM load the previous bucket beside the next broadcast."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.cli.common import default_card_dict
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.plan.rl_common import bf16_engine_weight_bytes
from trainfit.rollout.quantization import engine_weight_bytes
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import RolloutQuantization

H100 = default_rates(resolve_gpu("h100-sxm"))
GIB = 2**30


def _bf16(model):
    spec = from_catalog(model)
    return spec, bf16_engine_weight_bytes(spec)


# ------------------------------------------------------------------------------------------------
# NCCL reshard: what goes on which path
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model, fp8, published", [
    ("Qwen/Qwen3-4B", False, 0.669),           # dense: the MLP's gate / up / down
    ("Qwen/Qwen3-30B-A3B", False, 0.950),
    ("Qwen/Qwen3-30B-A3B", True, 0.930),       # 1-byte experts, their scales on the misc path
    ("deepseek-ai/DeepSeek-V3", False, 0.976),  # shared experts and MLA ride the misc path
])
def test_bulk_share_is_the_design_docs_xferdtensor_fraction(model, fp8, published):
    """The doc's "XferDTensor fraction" column (nccl-reshard-refit.md, Expected Performance) is not used by the
    model; the split read from ``is_nccl_reshard_param`` reproduces it."""
    spec = from_catalog(model)
    w = engine_weight_bytes(spec, quantization=RolloutQuantization.FP8) if fp8 else bf16_engine_weight_bytes(spec)
    pay = sync.reshard_payload(spec, weight_bytes=w, fp8=fp8)
    assert pay.bulk_fraction == pytest.approx(published, abs=0.002)


def test_fp8_puts_one_scale_per_expert_weight_on_the_misc_path():
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    bf16 = sync.reshard_payload(spec, weight_bytes=bf16_engine_weight_bytes(spec))
    fp8 = sync.reshard_payload(spec, weight_bytes=engine_weight_bytes(spec, quantization=RolloutQuantization.FP8),
                               fp8=True)
    assert bf16.scale_tensors == 0
    # 48 layers x 128 experts x (gate, up, down), and the 4 attention projections of each layer
    assert fp8.scale_tensors == 48 * 128 * 3 + 48 * 4
    assert fp8.misc_tensors == bf16.misc_tensors + fp8.scale_tensors
    assert fp8.bulk_calls == bf16.bulk_calls == 48 * 3  # a layer's experts go as one grouped tensor per projection
    assert fp8.bulk_bytes == pytest.approx(bf16.bulk_bytes / 2)


def _reshard(model="Qwen/Qwen3-30B-A3B", **over):
    spec, w = _bf16(model)
    kw = dict(spec=spec, weight_bytes=w, train_tp=1, train_pp=2, train_ep=8, train_etp=1, train_world=16, gen_tp=8,
              gen_engines=2, rates=H100, gpus_per_node=8, inter_node=True, sender_node_ranks=8)
    kw.update(over)
    return sync.nccl_reshard_seconds(**kw)


def test_each_vllm_rank_receives_its_own_shard():
    """Recv-bound (16 senders, 8-way vLLM): halving the engine's TP doubles every rank's bulk bytes; the misc path
    does not depend on it the same way, so the total grows, by at least the extra bulk wire."""
    t8, t4 = _reshard(gen_tp=8, gen_engines=2), _reshard(gen_tp=4, gen_engines=4)
    spec, w = _bf16("Qwen/Qwen3-30B-A3B")
    bulk = sync.reshard_payload(spec, weight_bytes=w).bulk_bytes
    nic = 40e9  # the card's default 400 Gb/s NIC per GPU at NCCL's efficiency (collectives.ring_bus_bytes_per_s)
    assert t4.total_s - t8.total_s > 0.9 * (bulk / 4 - bulk / 8) / nic
    assert any("7.25 GB received per vLLM rank" in a for a in t8.assumptions)


def test_one_instance_bulk_leaves_through_every_nic_of_the_sending_node():
    """Qwen3-4B DP8 -> one vLLM TP8 instance: the exact plan sends every region from training rank 0 (the first
    holder), and NCCL's PXN relays each send over NVLink to the node's GPU at the receiver's device index and out of
    that GPU's NIC (NVIDIA/nccl src/transport/net.cc sendSetup / recvSetup,
    src/graph/search.cc ``ncclTopoGetNetDev`` @5067397c2676d5aed50042fc39e5c8ee96eb0027): each NIC carries
    bulk / 8, not rank 0's one NIC the whole bulk (that would add about 0.12 s to the design doc's row, planned at 0.074 s)."""
    spec, w = _bf16("Qwen/Qwen3-4B")
    t = _reshard("Qwen/Qwen3-4B", train_pp=1, train_ep=1, train_world=8, gen_tp=8, gen_engines=1)
    bulk = sync.reshard_payload(spec, weight_bytes=w).bulk_bytes
    nic = 40e9  # the card's default 400 Gb/s NIC per GPU at NCCL's efficiency (collectives.ring_bus_bytes_per_s)
    assert any("0.672 GB sent per training rank" in a for a in t.assumptions)
    assert t.transfer_s < bulk / nic / 2  # rank 0's own NIC alone would need bulk / nic for the wire


def test_reshard_beats_the_full_broadcast_it_replaces():
    """The default non-colocated refit broadcasts every full tensor to every vLLM rank; the reshard sends each rank
    only its shard."""
    spec, w = _bf16("Qwen/Qwen3-30B-A3B")
    full = sync.weight_sync_seconds(
        mechanism="nccl_broadcast", weight_bytes=w, num_tensors=sync.hf_tensor_count(spec), train_shards=1, tp=8,
        rates=H100, engines=2, inter_node=True, gpus_per_node=8, bucket_bytes=1.6 * GIB,
        s_per_tensor=sync.S_PER_TENSOR_BUCKETED, sender_node_ranks=8,
        trainer_gather=sync.megatron_export_gather(spec=spec, tp=1, pp=2, ep=8, etp=1, world=16, gpus_per_node=8,
                                                   rates=H100))
    assert _reshard().total_s < full.total_s / 5


def test_fp8_is_slower_through_its_scale_siblings():
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    w8 = engine_weight_bytes(spec, quantization=RolloutQuantization.FP8)
    bf16 = _reshard(train_pp=1, train_world=16, gen_tp=2, gen_engines=8)
    fp8 = _reshard(weight_bytes=w8, fp8=True, train_pp=1, gen_tp=2, gen_engines=8)
    assert fp8.per_tensor_s - bf16.per_tensor_s == pytest.approx(48 * 128 * 3 * sync.S_PER_TENSOR_NEMO_RL_PACKED,
                                                                 rel=0.1)
    assert fp8.transfer_s < bf16.transfer_s  # half the bulk bytes


def test_misc_path_prices_the_packed_broadcasts_overlapped_cost_per_tensor():
    """The misc path's host cost per tensor is NeMo RL's packed broadcast's (export and load overlap: about half the
    lock-step figure), read from NVIDIA-NeMo/RL PR #2971's bf16 / fp8 pair of one layout (EP8 x PP2 -> TP2 x DP8,
    1.21-1.52 s and 3.20-4.30 s): at that cost the model's fp8 refit exceeds its bf16 one by the published
    difference of the midpoints, 2.385 s, where the lock-step 0.3 ms made it 5.3 s."""
    assert sync.S_PER_TENSOR_NEMO_RL_PACKED < sync.S_PER_TENSOR_BUCKETED / 1.8
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    w8 = engine_weight_bytes(spec, quantization=RolloutQuantization.FP8)
    layout = dict(train_pp=2, gen_tp=2, gen_engines=8, nic_bytes_per_s=50e9)
    bf16, fp8 = _reshard(**layout), _reshard(weight_bytes=w8, fp8=True, **layout)
    assert fp8.total_s - bf16.total_s == pytest.approx(2.385, abs=0.05)
    lock_step = _reshard(weight_bytes=w8, fp8=True, misc_s_per_tensor=sync.S_PER_TENSOR_BUCKETED, **layout)
    assert lock_step.total_s - bf16.total_s > 5.0


def test_default_non_colocated_refit_prices_the_same_packed_path():
    """NeMo RL's default non-colocated refit hands every tensor to the same ``packed_broadcast_producer`` /
    ``packed_broadcast_consumer`` pair as the reshard refit's misc path (NVIDIA-NeMo/RL v0.4.0-v0.6.0 and
    @7ea279abfbeb698b092856d0dab61e7cf39bc909: ``broadcast_weights_for_collective`` /
    ``update_weights_from_collective``), so its host cost per tensor is ``S_PER_TENSOR_NEMO_RL_PACKED``, not the
    lock-step ``S_PER_TENSOR_BUCKETED``; the colocated CUDA-IPC refit keeps its own."""
    split = sync.framework_sync_mechanism("nemo-rl", "split")
    assert split.s_per_tensor == sync.S_PER_TENSOR_NEMO_RL_PACKED
    assert split.mechanism is sync.SyncMechanism.NCCL_BROADCAST and split.bucket_bytes == pytest.approx(1.6 * GIB)
    assert sync.framework_sync_mechanism("nemo-rl", "colocate").s_per_tensor == sync.S_PER_TENSOR_BUCKETED
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    kw = dict(mechanism=split.mechanism, weight_bytes=bf16_engine_weight_bytes(spec),
              num_tensors=sync.hf_tensor_count(spec), train_shards=1, tp=2, rates=H100, engines=8, inter_node=True,
              gpus_per_node=8, nic_bytes_per_s=50e9, bucket_bytes=split.bucket_bytes, sender_node_ranks=8,
              trainer_group_ranks=16)
    packed = sync.weight_sync_seconds(**kw, s_per_tensor=split.s_per_tensor)
    lock_step = sync.weight_sync_seconds(**kw, s_per_tensor=sync.S_PER_TENSOR_BUCKETED)
    assert lock_step.per_tensor_s - packed.per_tensor_s == pytest.approx(
        kw["num_tensors"] * (sync.S_PER_TENSOR_BUCKETED - sync.S_PER_TENSOR_NEMO_RL_PACKED), rel=1e-6)


def test_pipeline_stages_overlap_on_two_streams():
    one, two = _reshard(train_pp=1), _reshard(train_pp=2)
    assert one.per_tensor_s >= two.per_tensor_s  # the bulk calls' latency over two streams


def test_reshard_refuses_expert_tensor_parallelism():
    with pytest.raises(CardError, match="expert_tensor_parallel must be 1"):
        _reshard(train_etp=2)


# ------------------------------------------------------------------------------------------------
# checkpoint-engine
# ------------------------------------------------------------------------------------------------

def _ckpt(**over):
    spec, w = _bf16("Qwen/Qwen3-235B-A22B")
    kw = dict(weight_bytes=w, num_tensors=sync.hf_tensor_count(spec), ranks=8, tp=8, gpus_per_node=8, rates=H100,
              bucket_bytes=8 * GIB, h2d_bytes_per_s=25e9)
    kw.update(over)
    return sync.checkpoint_engine_seconds(**kw)


def test_bucket_is_a_third_of_the_free_memory_share_capped_at_8_gib():
    assert sync.checkpoint_engine_bucket_bytes(free_bytes=9 * GIB) == pytest.approx(0.9 * 9 * GIB / 3)
    assert sync.checkpoint_engine_bucket_bytes(free_bytes=80 * GIB) == 8 * GIB
    assert sync.checkpoint_engine_bucket_bytes(free_bytes=GIB, max_tensor_bytes=2 * GIB) == 2 * GIB
    with pytest.raises(CardError):
        sync.checkpoint_engine_bucket_bytes(free_bytes=0)


def test_loads_run_beside_the_broadcasts_not_after_them():
    t = _ckpt()
    spec, w = _bf16("Qwen/Qwen3-235B-A22B")
    loads = sync.hf_tensor_count(spec) * sync.S_PER_TENSOR_SGLANG_LOAD
    h2d = w / 8 / 25e9
    # the whole: H2D + the longer of broadcast / load + a bucket's worth of the shorter + hand-offs
    assert t.total_s < h2d + t.transfer_s - h2d + loads  # not the sum
    assert t.total_s >= h2d + loads


def test_h2d_is_paid_per_rank_share_so_more_ranks_copy_less_each():
    eight, sixteen = _ckpt(), _ckpt(ranks=16, tp=16)
    assert sixteen.total_s < eight.total_s


def test_crossing_nodes_uses_the_nics():
    inside = _ckpt(ranks=8, gpus_per_node=8)
    across = _ckpt(ranks=16, gpus_per_node=8, nic_bytes_per_s=1e9)  # a slow NIC: the broadcast is bound by it
    assert across.transfer_s > inside.transfer_s


def test_checkpoint_engine_rejects_bad_inputs():
    with pytest.raises(CardError):
        _ckpt(bucket_bytes=0)
    with pytest.raises(CardError):
        _ckpt(ranks=0)


# ------------------------------------------------------------------------------------------------
# the card
# ------------------------------------------------------------------------------------------------

def _card(transport, *, placement="split", preset="nemo-rl", strategy="zero1", gpu="h100-sxm", **rollout):
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B")
    d["hardware"] = {**d.get("hardware", {}), "gpus_per_node": 2, "gpu": gpu}
    d["parallel"] = {**d.get("parallel", {}), "strategy": strategy}  # Megatron-Core is planned as ZeRO-1
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                    "placement": placement, "weight_transport": transport,
                    **({"gpus": 1} if placement == "split" else {}), **rollout}
    if preset:
        d["preset"] = preset
        d = apply_preset(d, preset)
    return load_card_dict(d)


def _sync_terms(plan):
    return next(p for p in plan.time_phases if p.name == "weight_sync").terms


def _not_estimated(plan) -> list[str]:
    return [a for a in plan.assumptions if a.startswith("time: not estimated")]


@pytest.mark.parametrize("transport, placement, words", [
    ("nccl_reshard", "split", "NeMo RL's NCCL reshard refit"),
    ("checkpoint_engine", "colocate", "checkpoint-engine's Broadcast update"),
])
def test_plan_accepts_the_transport_and_lists_it(transport, placement, words):
    plan = make_plan(_card(transport, placement=placement))
    assert not _not_estimated(plan)
    assert any(words in a and "compute.sync" in a for a in plan.assumptions)
    default = make_plan(_card("framework", placement=placement))
    assert _sync_terms(plan) != _sync_terms(default)
    assert not any(words in a for a in default.assumptions)


def test_plan_json_lists_the_mechanism():
    from trainfit.report.json_report import plan_to_dict

    obj = plan_to_dict(make_plan(_card("nccl_reshard")))
    assert "rollout.weight_transport nccl_reshard" in str(obj)


def test_bad_transport_value_is_one_line():
    with pytest.raises(CardError) as got:
        _card("nccl")
    assert str(got.value) == ("rollout.weight_transport: 'nccl' is not allowed; allowed: framework, nccl_reshard or"
                              " checkpoint_engine")


@pytest.mark.parametrize("transport, card_kw, words", [
    ("nccl_reshard", dict(placement="colocate"), "nccl_reshard is non-colocated only"),
    ("nccl_reshard", dict(strategy="fsdp"), "allowed: parallel.strategy single, ddp or zero1"),
    ("nccl_reshard", dict(strategy="zero2", preset=None), "allowed: parallel.strategy single, ddp or zero1"),
    ("nccl_reshard", dict(strategy="zero2", preset="trl"), "nccl_reshard is NeMo RL's; preset is 'trl'"),
    ("nccl_reshard", dict(engine="sglang", preset=None), "engine 'sglang' is not modelled with it"),
    ("nccl_reshard", dict(quantization="fp8"), "needs blockwise-fp8 primary weights"),
    ("nccl_reshard", dict(placement="colocate", engine="deepspeed_hybrid", preset=None),
     "engine 'deepspeed_hybrid' is not modelled with it"),
    ("checkpoint_engine", dict(placement="colocate", engine="deepspeed_hybrid", preset=None),
     "engine 'deepspeed_hybrid' is not modelled with it"),
    ("checkpoint_engine", dict(placement="colocate", gpu_memory_utilization=1.0),
     "rollout.gpu_memory_utilization: 1 leaves checkpoint_engine no device memory"),
])
def test_the_card_refuses_what_the_transport_refuses(transport, card_kw, words):
    """``check_nccl_reshard_refit_support`` (NeMo RL) and checkpoint-engine's needs, decided from the card alone: the
    card is refused in one line naming the field and what is allowed, before any plan."""
    with pytest.raises(CardError) as got:
        _card(transport, **card_kw)
    msg = str(got.value)
    assert words in msg and "\n" not in msg.strip() and "allowed" in msg


def test_reshard_refuses_expert_tensor_parallel_and_virtual_stages():
    d = _card("nccl_reshard").model_dump(mode="json", exclude_unset=True)
    for par, words in (({"expert_parallel": 2, "expert_tensor_parallel": 2, "tensor_parallel": 2},
                        "parallel.expert_tensor_parallel is 2"),
                       ({"pipeline_parallel": 2, "virtual_stages": 2, "pipeline_schedule": "interleaved"},
                        "virtual_stages 1")):
        bad = {**d, "model": "Qwen/Qwen3-30B-A3B", "parallel": {**d["parallel"], **par}}
        with pytest.raises(CardError, match=words):
            load_card_dict(bad)


def test_fp8_primary_weights_need_an_fp8_engine_under_reshard():
    d = _card("nccl_reshard").model_dump(mode="json", exclude_unset=True)
    d["precision"] = {**d.get("precision", {}), "compute": "fp8", "fp8_recipe": "blockwise", "fp8_params": True}
    with pytest.raises(CardError, match="precision.fp8_params: fp8 primary weights have no bf16 vLLM"):
        load_card_dict(d)


def test_cli_refuses_a_colocated_reshard_in_one_line(capsys):
    from trainfit.cli.main import main

    assert main(["plan", "--method", "grpo", "--set", "rollout.weight_transport=nccl_reshard"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rollout.weight_transport: nccl_reshard is non-colocated only" in err


def test_reshard_fp8_with_blockwise_training_plans():
    d = _card("nccl_reshard").model_dump(mode="json", exclude_unset=True)
    d["precision"] = {**d.get("precision", {}), "compute": "fp8", "fp8_recipe": "blockwise", "fp8_params": True}
    d["rollout"]["quantization"] = "fp8"
    plan = make_plan(load_card_dict(d))
    assert not _not_estimated(plan)
    assert _sync_terms(plan)["per_tensor"] > _sync_terms(make_plan(_card("nccl_reshard")))["per_tensor"]


def _ckpt_inputs(monkeypatch, **rollout) -> dict:
    """The inputs the plan hands ``checkpoint_engine_seconds`` (captured, then the real function runs)."""
    seen = {}
    real = sync.checkpoint_engine_seconds

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    monkeypatch.setattr(sync, "checkpoint_engine_seconds", spy)
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset="nemo-rl")
    d["hardware"] = {**d.get("hardware", {}), "gpus_per_node": 8, "gpu": "h100-sxm", "nodes": 2}
    d["parallel"] = {**d.get("parallel", {}), "strategy": "zero1"}
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                    "weight_transport": "checkpoint_engine", **rollout}
    make_plan(load_card_dict(apply_preset(d, "nemo-rl")))
    return seen


def test_checkpoint_engine_copies_are_the_engine_gpus(monkeypatch):
    """Split placement: the H2D copies and the broadcast's node are the engine's GPUs (rollout.gpus per node), not
    the training GPUs of the node."""
    from trainfit.compute.offload import host_copy_bytes_per_s

    r = default_rates(resolve_gpu("h100-sxm"))
    seen = _ckpt_inputs(monkeypatch, placement="split", gpus=2, tensor_parallel=2)
    assert seen["gpus_per_node"] == 2 and seen["ranks"] == 4  # 2 engines x tp 2 over 2 nodes: the NICs carry it
    assert seen["h2d_bytes_per_s"] == pytest.approx(host_copy_bytes_per_s(
        pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s, gpus_per_node=2))


def test_checkpoint_engine_bucket_holds_the_largest_tensor(monkeypatch):
    """``_detect_bucket_size`` never picks a bucket below the largest tensor: with almost no free memory the bucket is
    the embedding (Qwen3-0.6B's 151936 x 1024 in bf16)."""
    seen = _ckpt_inputs(monkeypatch, placement="colocate", gpu_memory_utilization=0.9999)
    m = from_catalog("Qwen/Qwen3-0.6B")
    assert seen["bucket_bytes"] == pytest.approx(2.0 * m.vocab_size * m.hidden_size)


def test_misc_broadcast_ring_runs_through_every_training_rank(monkeypatch):
    """The misc path's packed broadcast runs over ``model_update_group``, every training rank and every vLLM rank
    (``compute.sync.NRL_MISC_GROUP``), so NCCL's latency of each broadcast counts the training world, not rank 0
    alone."""
    seen = {}
    real = sync.weight_sync_seconds

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    monkeypatch.setattr(sync, "weight_sync_seconds", spy)
    _reshard(train_world=16)
    assert seen["trainer_group_ranks"] == 16
    monkeypatch.undo()
    # more ranks in the ring, a longer fill: the refit can only grow with the training world's ranks in the group
    base = _reshard(train_world=16)
    monkeypatch.setattr(sync, "weight_sync_seconds", lambda **kw: real(**{**kw, "trainer_group_ranks": 1}))
    assert base.total_s > _reshard(train_world=16).total_s
