"""The skyrl preset: SkyRL's colocated trainer offload (one weight round trip per step), its log-prob passes without
the optimizer state, its CUDA-IPC / packed-broadcast weight sync and its defaults (methods.presets, compute.sync
SKYRL_COLOCATED / SKYRL_BROADCAST, plan.rl_offload ONE_WEIGHT_ROUND_TRIP_PRESETS)."""

from __future__ import annotations

import pytest

from trainfit.compute.offload import host_copy_bytes_per_s
from trainfit.compute.rates import default_rates
from trainfit.compute.sync import GIB, S_PER_TENSOR_BUCKETED, SyncMechanism, framework_sync_mechanism
from trainfit.methods.presets import apply_preset
from trainfit.methods.rl import OPTIMIZER_SIDE, PARAM_SIDE, frozen_pass_offloaded, trainer_offload_of
from trainfit.methods.roles import old_logprob_pass
from trainfit.plan import make_plan
from trainfit.plan.resolve import gpu_of, model_spec_of
from trainfit.plan.rl_batches import passes_pack
from trainfit.plan.rl_offload import (
    _megatron_rank_state,
    trainer_state_offload_phase,
)
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Offload

MODEL = "Qwen/Qwen2.5-7B"


def _data(**rollout) -> dict:
    ro = {"tensor_parallel": 1, "prompts_per_step": 32, "num_generations": 4, "prompt_len": 256,
          "response_len": 512} | rollout
    # no KL term (SkyRL use_kl_loss and use_kl_in_reward off): SkyRL's own default keeps one (use_kl_loss True,
    # kl_loss_coef 0.001, methods.roles.GRPO_DEFAULT_KL_PRESETS), which these cards state off
    return {"model": MODEL, "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "zero1", "tensor_parallel": 2}, "batch": {"micro_batch_size": 1}, "rollout": ro,
            "roles": {"kl_coef": 0.0}}


def _card(preset: str | None = "skyrl", **rollout):
    d = _data(**rollout)
    return load_card_dict(apply_preset(d, preset) if preset else d)


def _phases(plan) -> dict:
    return {p.phase.value: p for g in plan.groups for p in g.phases}


def test_defaults_are_skyrls_config():
    card = _card()
    ro = card.rollout
    assert (ro.engine.value, ro.placement.value, ro.gpu_memory_utilization, ro.sleep_level) == (
        "vllm", "colocate", 0.8, 2)
    assert card.parallel.gradient_checkpointing
    assert trainer_offload_of(card)[0] is Offload.PARAMS_AND_OPTIMIZER  # colocate_all: WorkerDispatch offloads
    assert trainer_offload_of(_card(placement="split", gpus=4))[0] is Offload.NONE
    assert old_logprob_pass(card)  # policy_loss_type regular: fwd_logprobs_values_reward runs the policy forward
    assert not old_logprob_pass(_card(recompute_old_logprobs=False))
    assert passes_pack(card)  # remove_microbatch_padding true by default
    assert not passes_pack(_card(packed_sequences=False))


def test_weight_sync_paths():
    colo = framework_sync_mechanism("skyrl", "colocate")
    assert (colo.mechanism, colo.bucket_bytes, colo.s_per_tensor) == (
        SyncMechanism.COLOCATED_CUDA_IPC, GIB, S_PER_TENSOR_BUCKETED)
    assert colo.gathers_trainer_dtype and not colo.broadcasts_whole_bucket and not colo.sglang_tensor_requests
    split = framework_sync_mechanism("skyrl", "split")
    assert (split.mechanism, split.bucket_bytes) == (SyncMechanism.NCCL_BROADCAST, GIB)
    assert not split.trainer_ranks_in_group  # trainer rank 0 and the engine ranks only
    assert "SkyRL" in colo.source and "2e9c89af" in colo.source and "packed_tensor.py" in split.source


def test_megatron_sync_counts_the_bridge_export_gather():
    """SkyRL's Megatron worker exports through Megatron-Bridge on every rank (as NeMo RL's): the gather term."""
    def sync(card):
        return {ph.name: ph for ph in make_plan(card).time_phases}["weight_sync"]

    assert sync(_card()).terms["gather"] > 0
    assert sync(_card(None, sleep_level=2)).terms["gather"] == 0.0  # TRL's path: vLLM in the trainer's process


def test_state_offload_moves_the_weights_once():
    """WorkerDispatch reloads only what is missing: the weights once each way, the optimizer once each way,
    pinned, whatever passes the step runs; a card without the preset moves the weights for each pass."""
    card = _card()
    spec, r, gpu = model_spec_of(card), default_rates(gpu_of(card)), gpu_of(card)
    # Qwen2.5-7B counted from its config (H 3584, I 18944, 28 layers, 28 heads / 4 KV heads of 128, vocab 152064,
    # untied head, q/k/v biases): 7,615,616,512 parameters, of which the RMSNorm weights (two a layer, one final)
    # are replicated over tensor parallelism and the rest split in two (TP 2; 8 GPUs: 4 data-parallel ranks)
    h, inter, layers, kv, vocab = 3584, 18944, 28, 4 * 128, 152064
    norms = (2 * layers + 1) * h
    layer = h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * inter
    total = 2 * vocab * h + layers * layer + norms
    assert total == 7_615_616_512
    tp, dp = 2, 4
    shard = (total - norms) / tp + norms
    one_way = (2 * shard + 12 * shard / dp) / host_copy_bytes_per_s(
        pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s, gpus_per_node=8)
    t = trainer_state_offload_phase(card, spec, r, train_gpus=8)
    assert t.terms["to_host"] == pytest.approx(one_way, rel=1e-6)
    assert t.terms["to_device"] == pytest.approx(one_way, rel=1e-6)
    no_pass = trainer_state_offload_phase(_card(recompute_old_logprobs=False), spec, r, train_gpus=8)
    assert no_pass.seconds == pytest.approx(t.seconds)
    bare = _card(None, trainer_offload="params_and_optimizer", recompute_old_logprobs=True, sleep_level=2)
    assert trainer_state_offload_phase(bare, spec, r, train_gpus=8).seconds > t.seconds
    assert gpu.id == "h100-sxm"


def test_log_prob_pass_runs_without_the_optimizer_state():
    card = _card()
    assert frozen_pass_offloaded(card, Offload.PARAMS_AND_OPTIMIZER, actor_weights=True) == OPTIMIZER_SIDE
    # another model's pass (reference, critic) offloads the policy's weights too (_ensure_on_gpu)
    assert frozen_pass_offloaded(card, Offload.PARAMS_AND_OPTIMIZER,
                                 actor_weights=False) == OPTIMIZER_SIDE + PARAM_SIDE
    ph = _phases(make_plan(card))
    old = ph["old_logprob"].components
    assert old.get("optimizer_states", 0.0) == 0.0 and old.get("master_weights", 0.0) == 0.0
    assert old["weights"] > 0
    assert ph["actor_optimizer_step"].components["optimizer_states"] > 0


def test_reference_is_offloaded_outside_its_pass_and_priced_once_each_way():
    """Under colocate_all the reference is its own actor group, backloaded for its pass and offloaded when the policy
    is requested (methods.roles.REFERENCE_OFFLOAD_PRESETS): RefPlacement.CPU, and its bf16 rank shard crosses PCIe
    once each way per step in the state_offload phase."""
    from trainfit.methods.roles import reference_placement
    from trainfit.spec.enums import RefPlacement

    data = _data()
    data["roles"] = {"kl_coef": 0.001}
    with_kl = load_card_dict(apply_preset(data, "skyrl"))
    assert reference_placement(with_kl) is RefPlacement.CPU
    assert reference_placement(_card()) is RefPlacement.NONE  # GRPO without a KL term
    split = dict(data, rollout=data["rollout"] | {"placement": "split", "gpus": 4})
    assert reference_placement(load_card_dict(apply_preset(split, "skyrl"))) is RefPlacement.GPU
    spec, r = model_spec_of(with_kl), default_rates(gpu_of(with_kl))
    weights, _ = _megatron_rank_state(with_kl, spec, train_gpus=8)
    pinned = host_copy_bytes_per_s(pcie_bytes_per_s=r.pcie_bytes_per_s,
                                   host_memory_bytes_per_s=r.host_memory_bytes_per_s, gpus_per_node=8)
    base = trainer_state_offload_phase(_card(), spec, r, train_gpus=8)
    t = trainer_state_offload_phase(with_kl, spec, r, train_gpus=8)
    assert t.terms["to_host"] - base.terms["to_host"] == pytest.approx(weights / pinned, rel=1e-6)
    # the update holds no reference weights on the GPU
    ph = _phases(make_plan(with_kl))
    assert ph["actor_backward"].components.get("reference_weights", 0.0) == 0.0


def test_lora_sync_sleeps_at_level_1():
    """SkyRL forces vLLM sleep level 1 when it syncs LoRA adapters (FSDP with lora.rank > 0); Megatron merges the
    adapter by default and syncs full weights at level 2; a card's own sleep_level wins."""
    def card(scope: str, strategy: str, **rollout):
        d = _data(**rollout) | {"scope": scope}
        d["parallel"] = {"strategy": strategy}
        return load_card_dict(apply_preset(d, "skyrl"))

    assert card("lora", "fsdp").rollout.sleep_level == 1
    assert card("qlora", "fsdp").rollout.sleep_level == 1
    assert card("full", "fsdp").rollout.sleep_level == 2
    assert card("lora", "zero1").rollout.sleep_level == 2
    assert card("lora", "fsdp", sleep_level=2).rollout.sleep_level == 2


def test_reference_pass_holds_the_reference_without_the_policy():
    """SkyRL's reference pass (RefPlacement.CPU): the reference's bf16 shard is on the GPU with its forward's
    transient, the policy's weights and optimizer state in host RAM (_ensure_on_gpu offloads the rest of the
    colocation group); other phases hold no reference."""
    data = _data()
    data["roles"] = {"kl_coef": 0.001}
    card = load_card_dict(apply_preset(data, "skyrl"))
    ph = _phases(make_plan(card))
    ref = ph["ref_logprob"].components
    # Qwen2.5-7B's bf16 TP-2 shard (TP 2: the norms replicated), as the state offload test counts it
    h, layers = 3584, 28
    norms = (2 * layers + 1) * h
    assert ref["reference_weights"] == pytest.approx(2 * ((7_615_616_512 - norms) / 2 + norms), rel=1e-6)
    assert ref["logprob_pass"] > 0
    assert all(ref.get(k, 0.0) == 0.0 for k in ("weights", "master_weights", "optimizer_states"))
    assert ph["old_logprob"].components.get("reference_weights", 0.0) == 0.0
