"""The launcher the plan reads (``plan.time.launcher_of``) as a plan fact, its default for a preset-less RL card, and
the refusal of optimizer-only offload under torch FSDP outside verl (``plan.time.fsdp_optimizer_offload_refusal``)."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.export.common import plan_facts
from trainfit.plan import make_plan
from trainfit.plan.time import fsdp_optimizer_offload_refusal, launcher_of
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Launcher

SFT = {"model": "Qwen/Qwen3-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
       "parallel": {"strategy": "fsdp", "offload": "params_and_optimizer"},
       "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 2048}}
GRPO = {"model": "Qwen/Qwen3-8B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp"},
        "rollout": {"tensor_parallel": 2, "num_generations": 8, "prompts_per_step": 16, "prompt_len": 512,
                    "response_len": 1024}}


def test_the_launcher_is_a_plan_fact():
    # the launcher sets the host-side torch ops' thread count (plan.time.host_one_thread_per_rank), so two cards
    # differing only in it must not share their facts
    torchrun = load_card_dict({**SFT, "loop": {"launcher": "torchrun"}})
    spawn = load_card_dict({**SFT, "loop": {"launcher": "spawn"}})
    assert plan_facts(torchrun)["loop.launcher"] == "torchrun" and plan_facts(spawn)["loop.launcher"] == "spawn"
    assert plan_facts(load_card_dict(SFT))["loop.launcher"] == "torchrun"  # resolved, not null


def test_a_preset_less_rl_card_launches_as_trl_under_torchrun():
    assert launcher_of(load_card_dict(GRPO)) is Launcher.TORCHRUN
    assert launcher_of(load_card_dict({**GRPO, "preset": "verl"})) is Launcher.RAY


def test_optimizer_only_offload_under_torch_fsdp_is_refused_outside_verl():
    card = load_card_dict({**SFT, "parallel": {"strategy": "fsdp", "offload": "optimizer"}})
    why = fsdp_optimizer_offload_refusal(card)
    assert why is not None and why.startswith("parallel.offload: optimizer") and "allowed with it: none," in why
    with pytest.raises(CardError, match="parallel.offload: optimizer"):
        make_plan(card)
    for ok in ({**SFT, "parallel": {"strategy": "zero2", "offload": "optimizer"}},  # DeepSpeed's CPU Adam
               {**GRPO, "preset": "verl", "parallel": {"strategy": "fsdp", "offload": "optimizer"}},  # verl's actor
               SFT):
        assert fsdp_optimizer_offload_refusal(load_card_dict(ok)) is None
