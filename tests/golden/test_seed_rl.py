"""The seeds' RL scenarios (src/trainfit/scenarios.py; explained in docs/seed-scenarios.md).

Seed 001 section 2.3 and table 4.3: Qwen3-8B PPO on 8x A100 40GB, "unoptimised > 100 GB: no",
"FSDP + checkpointing ~54 GB: barely", "LoRA + FSDP + vLLM ~27 GB: yes".
Seed 000 sections 二 and 四: GRPO for a 27B dense model on RTX 4090 24GB.
"""

import pytest

from trainfit.plan import make_plan
from trainfit.scenarios import GRPO_SPACE, grpo_27b, ppo_tier
from trainfit.search import search
from trainfit.spec.card import load_card_dict
from trainfit.units import GIB


def plan(card):
    return make_plan(load_card_dict(card))


def test_ppo_unoptimised_does_not_fit_8xa100_40gb():
    p = plan(ppo_tier("unoptimised"))
    assert not p.fits
    assert p.peak.device > 100e9  # the seed's "> 100 GB"


def test_ppo_fsdp_checkpointing_barely_fits():
    p = plan(ppo_tier("fsdp_ckpt"))
    assert p.fits
    assert p.headroom_bytes < 0.25 * p.capacity_bytes  # "勉强可行": little headroom
    assert p.peak.phase.value == "rollout"  # HF generate gathers the whole actor under FSDP


def test_ppo_lora_vllm_fits_with_per_parameter_sync():
    card = ppo_tier("lora_fsdp_vllm")
    card["rollout"]["weight_sync"] = "per_parameter"
    lora = plan(card)
    fsdp = plan(ppo_tier("fsdp_ckpt"))
    assert lora.fits
    train = lambda p: max(x.allocated for x in p.phases if x.phase.value.startswith(("actor", "critic")))  # noqa: E731
    assert train(lora) < train(fsdp)


def test_ppo_lora_full_gather_sync_is_the_spike():
    p = plan(ppo_tier("lora_fsdp_vllm"))  # PEFT under FSDP merges the adapter into a full gathered copy
    assert p.peak.phase.value == "weight_sync"


@pytest.mark.parametrize("model", ["Qwen/Qwen3.5-27B", {"params": 27e9}])
@pytest.mark.parametrize("gpus", [1, 2])
@pytest.mark.parametrize("scope", ["full", "lora"])
def test_one_and_two_4090s_cannot_hold_bf16_27b(model, gpus, scope):
    # seed 000 section 四: 1 card: "BF16 完整权重已超容量"; 2 cards: "总容量仍低于权重下限"
    p = plan(grpo_27b(gpus=gpus, scope=scope, placement="colocate", model=model))
    load = next(x for x in p.phases if x.phase.value == "load")
    assert not p.fits
    assert load.components["weights"] * gpus > 48 * 10**9


@pytest.mark.parametrize("model", ["Qwen/Qwen3.5-27B", {"params": 27e9}])
def test_full_grpo_without_offload_does_not_fit_8_4090s(model):
    # seed 000 section 三: 432 GB of mixed-precision Adam state cannot live in 192 GB
    base = grpo_27b(gpus=8, scope="full", placement="colocate", model=model)
    space = {k: v for k, v in GRPO_SPACE.items() if k not in ("scope", "parallel.offload")}
    result = search(base, space)
    assert result.evaluated > 100
    assert not any(r.fits for r in result.rows)


def test_offload_moves_the_state_to_host_ram():
    p = plan(grpo_27b(gpus=8, scope="full", placement="colocate", parallel={"offload": "params_and_optimizer"}))
    assert p.host_ram_bytes > 200 * GIB  # weights, gradients and AdamW states of 27B in host RAM


@pytest.mark.parametrize("gpus", [4, 8])
def test_best_configuration_for_4_and_8_cards(gpus):
    result = search(grpo_27b(gpus=gpus, scope="lora", placement="colocate"), GRPO_SPACE)
    best = result.best
    assert best is not None and best.fits
    assert best.knobs["scope"] in ("lora", "qlora")
    assert best.peak_device_bytes <= 24564 * 2**20


def test_two_part_budget_is_shown(capsys):
    from trainfit.cli.main import main

    assert main(["plan", "--method", "grpo", "--model", "Qwen/Qwen3.5-27B", "--gpu", "rtx4090", "--gpus", "8",
                 "--scope", "lora", "--set", "rollout.tensor_parallel=8", "--set", "rollout.gpu_memory_utilization=0.5"]) == 0
    out = capsys.readouterr().out
    assert "two-part budget" in out and "training side" in out and "generation side" in out


@pytest.mark.parametrize("gpus", [4, 8])
def test_grpo_27b_on_4090s_is_timed_phase_by_phase(gpus):
    # seed 000 section 七: "GPU 利用率低 | 通信、工具执行、CPU、数据读取 | 分阶段计时" (time each phase), and
    # section 四: the RTX 4090 "不支持 NVLink。多卡任务还需检查 PCIe 拓扑与实际通信能力" (no NVLink; check PCIe)
    from trainfit.search import updated

    base = grpo_27b(gpus=gpus, scope="lora", placement="colocate")
    best = search(base, GRPO_SPACE).best
    card = updated(base, best.knobs)
    p = plan(card)
    assert p.fits and p.step_seconds == pytest.approx(best.step_seconds)
    phases = {t.name: t for t in p.time_phases}
    assert {"generation", "actor_update", "weight_sync"} <= set(phases)
    assert p.step_seconds == pytest.approx(sum(t.seconds for t in p.time_phases))
    # generation waits for the longest of 128 responses of up to 4096 tokens: a long tail once the batch halves, unless
    # the engine holds all 128 at once (then the truncated long-CoT profile ends most of them at 4096 together)
    gen = phases["generation"].terms
    assert gen["long_tail"] > 0 or (gen["preemption_recompute"] == 0 and gen["decode"] > 0)
    if p.card.rollout.tensor_parallel > 1:
        # tensor-parallel all-reduces go through host memory: no peer-to-peer between GeForce cards
        assert phases["generation"].terms["tp_all_reduce"] > 0.05 * phases["generation"].seconds
    assert any("GB/s bus bandwidth" in a and "in a node" in a for a in p.assumptions)


def test_grpo_27b_full_with_offload_times_the_cpu_optimizer():
    # seed 000 section 三: full fine-tuning's 432 GB of Adam state cannot stay on 8 x 24 GB: offload it,
    # and the step now includes the CPU's Adam over 27e9 parameters and the PCIe traffic
    p = plan(grpo_27b(gpus=8, scope="full", placement="colocate", parallel={"offload": "params_and_optimizer"}))
    update = next(t for t in p.time_phases if t.name == "actor_update")
    # CPU Adam streams ~30 B per parameter at the node's host memory bandwidth
    from trainfit.compute.rates import HOST_MEMORY_BYTES_PER_S

    assert update.terms["offload"] >= 27e9 * 30 / HOST_MEMORY_BYTES_PER_S
    assert any("CPU Adam" in a for a in p.assumptions)
