"""NeMo RL's Megatron refit gathers through Megatron-Bridge's ``export_hf_weights`` (``compute.sync.megatron_export_gather``):
per Megatron parameter a broadcast from its pipeline stage, a TP (expert-TP) all-gather and, per routed expert,
EP all-gathers, so every training rank receives the whole model (NVIDIA-NeMo/Megatron-Bridge
``src/megatron/bridge/models/conversion/param_mapping.py`` @1e9a459b43aa1f62ca1356e554d2b0196ebdd546)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives, sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.memory.params import routed_expert_params
from trainfit.plan import make_plan
from trainfit.plan.rl_common import bf16_engine_weight_bytes
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
NDR_400G = 50e9
DSV3 = from_catalog("deepseek-ai/DeepSeek-V3")
QWEN3_30B = from_catalog("Qwen/Qwen3-30B-A3B")


def _dsv3(**kw):
    args = {"spec": DSV3, "tp": 1, "pp": 16, "ep": 16, "etp": 1, "world": 256, "gpus_per_node": 8, "rates": H100,
            "nic_bytes_per_s": NDR_400G} | kw
    return sync.megatron_export_gather(**args)


def test_expert_all_gathers_by_hand():
    """Qwen3-30B-A3B at EP 8 in one node: 48 MoE layers x 128/8 local experts x (gate, up, down) = 2,304
    all-gathers over 8 NVLink ranks, returning every expert of the model: NCCL's tuner latency each (ring/Simple on
    NVLink, 8.4 us + 7 x 3.4 us, for ~25 MB), and 7/8 of the experts' bf16 bytes at NCCL's intra-node rate. No PP,
    no TP: nothing else."""
    g = sync.megatron_export_gather(spec=QWEN3_30B, tp=1, pp=1, ep=8, etp=1, world=32, gpus_per_node=8, rates=H100,
                                    nic_bytes_per_s=NDR_400G)
    experts = 2.0 * routed_expert_params(QWEN3_30B)
    n = 48 * 16 * 3
    by_hand = n * (8.4e-6 + 7 * 3.4e-6) + 7 / 8 * experts / H100.intra_node_bus_bytes_per_s
    assert g.collectives == n
    assert g.ep_gather_s == pytest.approx(by_hand)
    assert g.pp_broadcast_s == 0 and g.tp_gather_s == 0 and g.nic_s == 0


def test_deepseek_v3_groups_cross_nodes():
    """DeepSeek-V3, TP1 PP16 EP16 on 32 nodes (the NeMo RL recipe): a PP group has one rank per node (stride 16),
    so each broadcast leaves through one 400 Gb/s NIC (40 GB/s); an EP group spans two nodes, 8 NICs. The PP
    broadcasts carry each rank's shard of every stage (dense + experts / 16), the EP gathers every expert."""
    g = _dsv3()
    assert g.nic_s == pytest.approx(g.total_s)
    experts = 2.0 * routed_expert_params(DSV3)
    local = 2.0 * 671.0e9 - experts + experts / 16  # dense + this rank's experts, of every stage
    # NCCL's latency of a 16-rank broadcast over 16 nodes (one GPU each): base + 15 network steps (the fill)
    per_call = collectives.nccl_broadcast(total_bytes=local / 2588, ranks=16, nodes=16,
                                          bus_bytes_per_s=NDR_400G * 0.8).latency_s
    assert per_call == pytest.approx((8.4 + 15 * 14.0) * 1e-6 + 15 * collectives.NCCL_NET_STEP_EXCESS_S)
    assert g.pp_broadcast_s == pytest.approx(2588 * per_call + local / (NDR_400G * 0.8), rel=0.02)
    # the EP all-gathers: NCCL's tuner over the 2 nodes the group spans (collectives.all_gather_seconds)
    ep_each = collectives.all_gather_seconds(total_bytes=experts / 2784, ranks=16, bus_bytes_per_s=8 * NDR_400G * 0.8,
                                             nodes=2)
    assert g.ep_gather_s == pytest.approx(2784 * ep_each, rel=1e-6)
    assert ep_each - 15 / 16 * experts / 2784 / (8 * NDR_400G * 0.8) < per_call
    assert "2784 EP all-gathers over 16 (across nodes at 320 GB/s)" in g.notes[0]
    assert 6.0 < g.total_s < 9.0


def test_nvlink_domain_keeps_the_export_off_the_nic():
    """A 64-GPU GB200 NVL72 run: the groups' "node" is the NVLink domain (``plan.time.nvlink_gpus_per_node``),
    so none of the export crosses a NIC and it is faster than the same layout on 8-GPU nodes."""
    gb = default_rates(resolve_gpu("gb200"))
    kw = {"spec": DSV3, "tp": 1, "pp": 4, "ep": 16, "etp": 1, "world": 64, "rates": gb, "nic_bytes_per_s": NDR_400G}
    rack = sync.megatron_export_gather(gpus_per_node=64, **kw)
    trays = sync.megatron_export_gather(gpus_per_node=4, **kw)
    assert rack.nic_s == 0 and "across nodes" not in rack.notes[0]
    assert trays.nic_s > 0 and rack.total_s < trays.total_s


def test_no_model_parallelism_no_gather():
    g = sync.megatron_export_gather(spec=QWEN3_30B, tp=1, pp=1, ep=1, etp=1, world=8, gpus_per_node=8, rates=H100)
    assert g.total_s == 0 and g.collectives == 0


def test_measured_dsv3_nccl_refit():
    """NeMo RL docs/guides/checkpoint-engine-refit.md @aa8bfb2e8b606f9ad5add01b52635edf9ab620f8: DeepSeek-V3 from
    32 policy nodes (Megatron TP1 PP16 EP16) to 4 nodes of vLLM TP32 over the NCCL path: 14.2 s (async timer), 15.5 s
    (synchronous verifier). The export (~7.5 s, all on the NICs) shares the NICs with the broadcast; the ~46k-tensor
    host cost runs beside that device work. Adding the three would be ~28 s."""
    fs = sync.framework_sync_mechanism("nemo-rl", "split")
    g = _dsv3()
    t = sync.weight_sync_seconds(mechanism=fs.mechanism, weight_bytes=2.0 * 671.0e9, num_tensors=sync.hf_tensor_count(DSV3),
                                 train_shards=1, tp=32, engines=1, rates=H100, inter_node=True, gpus_per_node=8,
                                 nic_bytes_per_s=NDR_400G, bucket_bytes=fs.bucket_bytes, s_per_tensor=fs.s_per_tensor,
                                 sender_node_ranks=8, trainer_gather=g)
    assert t.gather_s == pytest.approx(g.total_s)
    assert t.total_s == pytest.approx(t.gather_s + t.transfer_s + t.per_tensor_s)
    assert 14.2 * 0.85 < t.total_s < 15.5 * 1.2
    assert t.gather_s + t.transfer_s + sync.hf_tensor_count(DSV3) * fs.s_per_tensor > 1.5 * t.total_s


def test_colocated_export_runs_before_each_hand_off():
    """Colocated (CUDA IPC, ping-pong buffers): the export and bucket fill are the trainer's stage, the engine's
    load the other; the host cost per tensor runs beside both. The total is at least the larger of the host cost
    and the export + the fill, at most the sum of everything."""
    fs = sync.framework_sync_mechanism("nemo-rl", "colocate")
    g = _dsv3()
    kw = {"mechanism": fs.mechanism, "weight_bytes": 2.0 * 671.0e9, "num_tensors": sync.hf_tensor_count(DSV3),
          "train_shards": 1, "tp": 32, "rates": H100, "bucket_bytes": fs.bucket_bytes, "s_per_tensor": fs.s_per_tensor}
    base = sync.weight_sync_seconds(**kw)
    t = sync.weight_sync_seconds(**kw, trainer_gather=g)
    fill = 2 * 2.0 * 671.0e9 / H100.hbm_bytes_per_s
    assert t.gather_s + t.transfer_s >= g.total_s + fill
    assert max(base.per_tensor_s, g.total_s + fill) <= t.total_s <= base.total_s + g.total_s
    assert any("export gather" in a for a in t.assumptions)


def test_export_with_sharded_gather_is_refused():
    with pytest.raises(CardError, match="train_shards 1"):
        sync.weight_sync_seconds(mechanism="colocated_cuda_ipc", weight_bytes=1e9, num_tensors=10, train_shards=8,
                                 tp=1, rates=H100, trainer_gather=_dsv3())


@settings(max_examples=25, deadline=None)
@given(ep=st.sampled_from([1, 2, 4, 8, 16, 32]), pp=st.sampled_from([1, 2, 4, 8, 16]),
       gpn=st.sampled_from([4, 8, 72]), nic=st.floats(min_value=12.5e9, max_value=100e9))
def test_export_never_faster_on_a_slower_nic_and_parts_add_up(ep, pp, gpn, nic):
    world = 256
    kw = {"spec": DSV3, "tp": 1, "pp": pp, "ep": ep, "etp": 1, "world": world, "gpus_per_node": gpn, "rates": H100}
    fast = sync.megatron_export_gather(nic_bytes_per_s=nic * 2, **kw)
    slow = sync.megatron_export_gather(nic_bytes_per_s=nic, **kw)
    assert slow.total_s >= fast.total_s - 1e-12
    assert 0 <= slow.nic_s <= slow.total_s + 1e-12
    assert slow.total_s == pytest.approx(slow.pp_broadcast_s + slow.tp_gather_s + slow.ep_gather_s)
    fs = sync.framework_sync_mechanism("nemo-rl", "split")
    t = sync.weight_sync_seconds(mechanism=fs.mechanism, weight_bytes=2.0 * 671.0e9, num_tensors=50_000,
                                 train_shards=1, tp=8, engines=4, rates=H100, inter_node=True, gpus_per_node=8,
                                 nic_bytes_per_s=nic, bucket_bytes=fs.bucket_bytes, sender_node_ranks=8,
                                 trainer_gather=slow)
    assert min(t.gather_s, t.transfer_s, t.per_tensor_s) >= 0
    assert t.total_s == pytest.approx(t.gather_s + t.transfer_s + t.per_tensor_s)


def test_broadcast_seconds():
    assert collectives.broadcast_seconds(total_bytes=1e9, ranks=1, bus_bytes_per_s=1e9, latency_s=1e-5) == 0
    assert collectives.broadcast_seconds(total_bytes=4e9, ranks=5, bus_bytes_per_s=2e9,
                                         latency_s=1e-5) == pytest.approx(1e-5 + 2.0)
    # the bytes cross each link once: a broadcast costs n/(n-1) of an all-gather's byte term for the same output
    ag = collectives.all_gather_seconds(total_bytes=4e9, ranks=5, bus_bytes_per_s=2e9, latency_s=1e-5)
    assert ag < collectives.broadcast_seconds(total_bytes=4e9, ranks=5, bus_bytes_per_s=2e9, latency_s=1e-5)


# ------------------------------------------------------------------------------------------------
# which cards take the path (plan.rl_sync.sync_phase)
# ------------------------------------------------------------------------------------------------


def _card(preset: str, strategy: str, **parallel):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "grpo", "preset": preset,
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": strategy, **parallel},
        "rollout": {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 256,
                    "response_len": 2048, "response_len_mean": 1000, "tensor_parallel": 2,
                    "gpu_memory_utilization": 0.5},
    })


def _sync(card):
    return {p.name: p for p in make_plan(card).time.phases}["weight_sync"]


def test_only_nemo_rl_megatron_takes_the_export():
    """NeMo RL's Megatron backend (a non-FSDP strategy with EP 8): the export gather; its DTensor backend (FSDP):
    the sharded gather as before; verl with the same Megatron layout: no export gather (not modelled)."""
    mega = _sync(_card("nemo-rl", "zero1", expert_parallel=8))
    g = sync.megatron_export_gather(spec=QWEN3_30B, tp=1, pp=1, ep=8, etp=1, world=16, gpus_per_node=8, rates=H100,
                                    nic_bytes_per_s=NDR_400G)
    assert mega.terms["gather"] == pytest.approx(g.total_s) and g.total_s > 0
    fsdp = _sync(_card("nemo-rl", "fsdp"))
    shards = sync.weight_sync_seconds(mechanism="colocated_cuda_ipc", weight_bytes=bf16_engine_weight_bytes(QWEN3_30B),
                                      num_tensors=sync.hf_tensor_count(QWEN3_30B), train_shards=16, tp=2, rates=H100,
                                      gpus_per_node=8, nic_bytes_per_s=NDR_400G)
    assert fsdp.terms["gather"] == pytest.approx(shards.gather_s)
    verl = _sync(_card("verl", "zero1", expert_parallel=8))
    assert verl.terms["gather"] == 0


# ------------------------------------------------------------------------------------------------
# NeMo RL v0.3's own gather_params (compute.sync.NEMO_RL_V03_GATHER)
# ------------------------------------------------------------------------------------------------

LLAMA_70B = from_catalog("meta-llama/Llama-3.1-70B")


def _llama70(**kw):
    args = {"spec": LLAMA_70B, "tp": 4, "pp": 4, "ep": 1, "etp": 1, "world": 64, "gpus_per_node": 8, "rates": H100,
            "nic_bytes_per_s": NDR_400G} | kw
    return sync.megatron_export_gather(**args)


def test_v03_gather_broadcasts_tp_whole_tensors():
    """v0.3 all-gathers over TP on the owning stage first, then broadcasts the TP-whole tensor over PP: the PP
    broadcasts carry about ``tp`` times Megatron-Bridge's bytes (the replicated norms are not split either way, and
    NCCL's latency per broadcast is the same). Every rank walks every key in one sorted loop and waits in each key's
    PP broadcast for the owning stage's TP all-gather, so every key's TP gather is on its path: the same TP gathers,
    in count and seconds, as Megatron-Bridge's export (not the own stage's quarter)."""
    bridge, v03 = _llama70(), _llama70(v03_gather=True)
    assert bridge.overlaps_send and not v03.overlaps_send
    assert 3.0 * bridge.pp_broadcast_s < v03.pp_broadcast_s < 4.0 * bridge.pp_broadcast_s
    assert v03.tp_gather_s == pytest.approx(bridge.tp_gather_s) and v03.tp_gather_s > 0
    assert v03.collectives == bridge.collectives
    assert "v0.3 gather_params" in v03.notes[0] and "TP-whole" in v03.notes[0]
    # without pipeline parallelism nothing is broadcast whichever the release
    assert _llama70(pp=1, world=16, v03_gather=True).pp_broadcast_s == 0.0


def test_v03_expert_gathers_one_per_local_expert_weight():
    """One stacked all-gather over EP per local expert key (fc1, fc2), not Megatron-Bridge's three (gate, up, down)."""
    kw = {"spec": QWEN3_30B, "tp": 1, "pp": 1, "ep": 8, "etp": 1, "world": 32, "gpus_per_node": 8, "rates": H100,
          "nic_bytes_per_s": NDR_400G}
    assert sync.megatron_export_gather(**kw).collectives == 48 * 16 * 3
    assert sync.megatron_export_gather(**kw, v03_gather=True).collectives == 48 * 16 * 2


def test_v03_colocated_refit_is_lock_step():
    """v0.3's groups go one after the other (ray.get of the handles, then of the engines' loads): the gather, the
    fill and the engine's load add; the host cost overlaps only its own group's device work."""
    fs = sync.framework_sync_mechanism("nemo-rl", "colocate")
    wbytes = bf16_engine_weight_bytes(LLAMA_70B)
    kw = {"mechanism": fs.mechanism, "weight_bytes": wbytes, "num_tensors": sync.hf_tensor_count(LLAMA_70B),
          "train_shards": 1, "tp": 4, "rates": H100, "bucket_bytes": fs.bucket_bytes, "s_per_tensor": fs.s_per_tensor}
    g = _llama70(v03_gather=True)
    t = sync.weight_sync_seconds(**kw, trainer_gather=g)
    fill, load = 2 * wbytes / H100.hbm_bytes_per_s, 2 * wbytes / 4 / H100.hbm_bytes_per_s
    assert t.gather_s + t.transfer_s == pytest.approx(g.total_s + fill + load)
    host = sync.weight_sync_seconds(**kw).per_tensor_s
    assert t.per_tensor_s == pytest.approx(max(host, g.total_s + fill + load) - (g.total_s + fill + load))
    assert any("lock-step" in a for a in t.assumptions)
    # Megatron-Bridge's export overlaps the next bucket's export with the current load: never slower
    assert sync.weight_sync_seconds(**kw, trainer_gather=_llama70()).total_s < t.total_s


def _llama70_card(**software):
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-70B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 8},
        "parallel": {"strategy": "zero1", "tensor_parallel": 4, "pipeline_parallel": 4},
        "rollout": {"placement": "colocate", "prompts_per_step": 64, "num_generations": 32, "prompt_len": 256,
                    "response_len": 2048, "response_len_mean": 400, "tensor_parallel": 4,
                    "gpu_memory_utilization": 0.6},
        **({"software": software} if software else {}),
    })


def test_nemo_rl_pin_before_0_4_takes_the_v03_gather():
    """A card pinned to NeMo RL 0.3.x (``software.nemo-rl``) gathers as v0.3 did; 0.4 and later, or no pin, take
    Megatron-Bridge's export."""
    g = {k: _sync(_llama70_card(**v)).terms["gather"] for k, v in
         {"none": {}, "0.3.0": {"nemo-rl": "0.3.0"}, "0.3.1": {"nemo-rl": "v0.3.1"}, "0.4.0": {"nemo-rl": "0.4.0"}}.items()}
    assert g["0.3.0"] == g["0.3.1"] > 2 * g["none"]
    assert g["0.4.0"] == g["none"]
    rates = default_rates(resolve_gpu("h100-sxm"))
    want = sync.megatron_export_gather(spec=LLAMA_70B, tp=4, pp=4, ep=1, etp=1, world=64, gpus_per_node=8,
                                       rates=rates, nic_bytes_per_s=NDR_400G, v03_gather=True)
    assert g["0.3.0"] == pytest.approx(want.total_s)


def test_v03_gather_needs_the_colocated_ipc_refit(monkeypatch):
    """v0.3's gather_params and its lock-step groups were read on the colocated CUDA-IPC refit: a colocated card
    pinned before 0.4 whose sync is another mechanism (an NCCL broadcast here) keeps Megatron-Bridge's export, so
    its device and host parts overlap alike."""
    split = sync.framework_sync_mechanism("nemo-rl", "split")

    def nccl_everywhere(framework, placement, weight_sync=None, engine="vllm"):
        fs = real(framework, placement, weight_sync, engine)
        return split if fs.framework == "nemo-rl" else fs

    real = sync.framework_sync_mechanism
    monkeypatch.setattr(sync, "framework_sync_mechanism", nccl_everywhere)
    g = _sync(_llama70_card(**{"nemo-rl": "0.3.0"})).terms["gather"]
    bridge = sync.megatron_export_gather(spec=LLAMA_70B, tp=4, pp=4, ep=1, etp=1, world=64, gpus_per_node=8,
                                         rates=H100, nic_bytes_per_s=NDR_400G)
    assert g == pytest.approx(bridge.total_s)


def test_lock_step_host_only_with_the_lock_step_device_path():
    """weight_sync_seconds: a gather that does not overlap the send (v0.3's) is lock-step on the colocated CUDA-IPC
    path, device and host; on an NCCL broadcast both parts take the overlapping formulas."""
    wbytes = bf16_engine_weight_bytes(LLAMA_70B)
    kw = {"mechanism": "nccl_broadcast", "weight_bytes": wbytes, "num_tensors": sync.hf_tensor_count(LLAMA_70B),
          "train_shards": 1, "tp": 4, "rates": H100, "bucket_bytes": 1.6 * sync.GIB,
          "s_per_tensor": 2e-3, "inter_node": True, "gpus_per_node": 8, "nic_bytes_per_s": NDR_400G}
    v03 = sync.weight_sync_seconds(**kw, trainer_gather=_llama70(v03_gather=True))
    host = sync.weight_sync_seconds(**kw).per_tensor_s
    both = v03.gather_s + v03.transfer_s
    stages = -(-wbytes // (1.6 * sync.GIB))
    assert host > 0 and not any("lock-step" in a for a in v03.assumptions)
    assert v03.per_tensor_s == pytest.approx(max(host, both) + min(host, both) / stages - both)
