"""RL cards a framework refuses are refused by the card validator, one line naming the fields and what is allowed
(exit 2 from the CLI); the reproducers are the seed's 27B GRPO card (``trainfit.scenarios.grpo_27b``) with
docs/seed-scenarios.md's best knobs."""

from __future__ import annotations

import pytest

from trainfit import scenarios
from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict

BEST = {"loss": {"chunked": True}, "parallel": {"offload": "none"},
        "rollout": {"gpu_memory_utilization": 0.7, "sleep_level": 1, "weight_sync": "per_parameter"}}


def seed_card(*, gpus: int, placement: str, **rollout) -> dict:
    card = scenarios.grpo_27b(gpus=gpus, scope="qlora", placement=placement, **BEST)
    card["rollout"].update(rollout)
    return card


@pytest.mark.parametrize("mode", ["one_step_off", "fully_async"])
def test_async_rl_with_colocated_placement_is_refused(mode):
    """NeMo RL's async_grpo_train asserts "Colocated inference is not supported for async GRPO"
    (NVIDIA-NeMo/RL c112cfe15a69729d27bcd5dc967ffabaf6418f34 nemo_rl/algorithms/grpo.py l.4187-4189); verl's
    one-step-off and fully-async trainers assert ``not self.hybrid_engine`` (volcengine/verl
    b178a3cd56f58b2d502255daba591e92833930a7 verl/experimental/one_step_off_policy/ray_trainer.py l.105)."""
    with pytest.raises((CardError, ValueError), match=r"rollout.async_mode.*placement split"):
        load_card_dict(seed_card(gpus=8, placement="colocate", async_mode=mode))


def test_async_rl_with_split_placement_is_kept():
    card = load_card_dict(seed_card(gpus=8, placement="split", async_mode="one_step_off"))
    assert card.rollout.async_mode.value == "one_step_off"


def test_async_colocated_refusal_is_one_line_exit_2(tmp_path, capsys):
    import yaml

    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(seed_card(gpus=8, placement="colocate", async_mode="one_step_off")))
    rc = main(["plan", str(path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "rollout.async_mode" in err and "rollout.placement" in err and "allowed" in err


# ------------------------------------------------------------------------------------------------
# the old policy's log-prob pass where TRL is the planned framework, and with several mini-batches
# ------------------------------------------------------------------------------------------------


def test_no_preset_plans_trls_old_logprob_pass_like_the_trl_preset():
    """Without a preset the plan says TRL's framework is planned (plan.assumptions); TRL's GRPOTrainer computes
    old_per_token_logps when use_vllm and vllm_importance_sampling_correction (huggingface/trl
    f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py l.2561-2576), so the vLLM card without a
    preset runs the pass as it does under preset trl."""
    from trainfit.methods.roles import old_logprob_pass

    bare = load_card_dict(seed_card(gpus=8, placement="colocate"))
    trl = load_card_dict({**seed_card(gpus=8, placement="colocate"), "preset": "trl"})
    assert bare.preset is None
    assert old_logprob_pass(trl) and old_logprob_pass(bare)


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_several_mini_batches_need_the_old_logprobs(engine):
    """Every mini-batch after the first is trained by an updated policy, so its ratio needs the generating
    policy's log-probs: TRL computes them when gradient_accumulation_steps % (steps_per_generation *
    num_iterations) != 0, i.e. steps_per_generation > gradient_accumulation_steps (trl/trainer/grpo_trainer.py
    l.2561-2566 @f2cd57710ae345ea6428ae95363267fcf38a3dc8); with one mini-batch and the hf engine it does not."""
    from trainfit.methods.roles import old_logprob_pass

    extra = {"engine": engine}
    if engine == "hf":
        extra.update(gpu_memory_utilization=0.9, sleep_level=0)
    one = load_card_dict(seed_card(gpus=8, placement="colocate", **extra))
    four = load_card_dict(seed_card(gpus=8, placement="colocate", mini_batches=4, **extra))
    assert old_logprob_pass(four)
    assert old_logprob_pass(one) is (engine == "vllm")


def test_mini_batches_add_the_old_logprob_phase_to_the_step():
    from trainfit.plan import make_plan

    p = make_plan(load_card_dict(seed_card(gpus=8, placement="colocate", mini_batches=4, engine="hf",
                                           gpu_memory_utilization=0.9, sleep_level=0)))
    assert "old_logprob" in [ph.name for ph in p.time.phases]


# ------------------------------------------------------------------------------------------------
# the engine's tensor parallel divides its GPUs
# ------------------------------------------------------------------------------------------------


def test_colocated_engine_tp_must_divide_the_gpus():
    """6 GPUs, rollout TP 4, colocated: TRL colocate raises "tensor_parallel_size (...) must divide world size (...)
    evenly" (huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/generation/vllm_generation.py
    l.318-322); verl asserts the rollout world size is divisible by the engine's (volcengine/verl
    b178a3cd56f58b2d502255daba591e92833930a7 verl/workers/fsdp_workers.py l.622-627)."""
    with pytest.raises((CardError, ValueError), match=r"rollout.tensor_parallel: 4 does not divide the 6 GPUs"):
        load_card_dict(seed_card(gpus=6, placement="colocate", tensor_parallel=4))
    assert load_card_dict(seed_card(gpus=6, placement="colocate", tensor_parallel=3)).rollout.tensor_parallel == 3


def test_split_engine_tp_must_divide_the_rollout_gpus():
    with pytest.raises((CardError, ValueError), match=r"rollout.tensor_parallel: 3 does not divide the 4 rollout GPUs"):
        load_card_dict(seed_card(gpus=8, placement="split", tensor_parallel=3))
    assert load_card_dict(seed_card(gpus=8, placement="split", tensor_parallel=2)).rollout.tensor_parallel == 2


def test_fit_does_not_search_an_engine_tp_that_does_not_divide_its_gpus():
    """fit's RL space on 6 cards: TP 4 (and 8) never reach the search; 1 and 2 do."""
    from trainfit.fit_search import rl_combos

    base = seed_card(gpus=6, placement="colocate")
    tps = {c["rollout.tensor_parallel"] for c in rl_combos(6, pinned=frozenset(), base=base)
           if c.get("rollout.placement", "colocate") == "colocate"}
    assert tps == {1, 2}
    split = {c["rollout.tensor_parallel"] for c in rl_combos(6, pinned=frozenset(), base=base)
             if c.get("rollout.placement") == "split"}
    assert split == {1}  # 3 engine GPUs: TP 2 does not divide them
