"""One rule for the reference's memory and time (methods.roles.reference_loaded): a reference the card sets is
planned where the framework loads and runs it, and is absent from both sides, with one assumption line, where the
framework skips it at KL coefficient 0 (TRL GRPOTrainer ``beta == 0.0`` -> ``ref_model = None``, trl 1.16.0
trl/trainer/grpo_trainer.py l.983-990; verl ``need_reference_policy``, verl/trainer/ppo/utils.py l.72-76
@b178a3cd56f58b2d502255daba591e92833930a7; OpenRLHF openrlhf/cli/train_ppo_ray.py l.93-103
@3c3be6234e0cb353e76bb8019947db9dfe99fca7). Reproducer: seed 000's GRPO 27B QLoRA on 4 RTX 4090s with
roles.reference lora_disabled and the default kl_coef 0."""

import pytest

from trainfit.methods.roles import reference_loaded, reference_placement
from trainfit.plan import make_plan
from trainfit.scenarios import grpo_27b, ppo_tier
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import RefPlacement
from trainfit.spec.dotted import merge_under


def _grpo(**roles):
    return load_card_dict(grpo_27b(gpus=4, scope="qlora", placement="colocate", loss={"chunked": True},
                                   parallel={"offload": "params_and_optimizer"},
                                   rollout={"gpu_memory_utilization": 0.7, "sleep_level": 1},
                                   roles={"reference": "lora_disabled", **roles}))


def _sides(card):
    p = make_plan(card)
    return ("ref_logprob" in [ph.phase.value for ph in p.phases],
            "ref_logprob" in [ph.name for ph in p.time.phases], p.warnings)


def test_grpo_reference_set_at_kl_0_is_in_neither_side():
    memory, time, warnings = _sides(_grpo())
    assert (memory, time) == (False, False)
    # a warning the user sees (report.text prints plan.warnings), not an assumption
    assert sum("is neither loaded nor run at kl_coef 0" in w for w in warnings) == 1
    assert not any("is neither loaded nor run" in a for a in make_plan(_grpo()).assumptions)


def _cli_card(card, sets):
    """The card as ``trainfit plan --method ppo --preset verl --set ...`` builds it (cli.common.load_card: the
    preset merged under the card data before validation)."""
    from trainfit.cli.common import load_card

    return load_card(None, {"method": "ppo", "preset": "verl"} | card, sets)


def test_a_reference_the_preset_filled_raises_no_warning():
    """verl's preset fills roles.reference cpu; at kl 0 verl loads no reference, but the user set nothing: no
    warning (before, the note fired on the preset's fill)."""
    card = _cli_card({}, ["roles.kl_coef=0"])
    assert "reference" in card.roles.model_fields_set  # the merge makes the fill look set
    assert not reference_loaded(card)
    plan = make_plan(card)
    assert not any("is neither loaded nor run" in line for line in (*plan.warnings, *plan.assumptions))


def test_a_reference_the_user_set_under_a_preset_warns():
    card = _cli_card({}, ["roles.kl_coef=0", "roles.reference=gpu"])
    assert sum("roles.reference gpu is neither loaded nor run" in w for w in make_plan(card).warnings) == 1


def test_grpo_reference_with_kl_is_in_both_sides():
    memory, time, warnings = _sides(_grpo(kl_coef=0.04))
    assert (memory, time) == (True, True)
    assert not any("is neither loaded nor run" in w for w in warnings)


@pytest.mark.parametrize("preset,expected", [
    ("verl", False), ("openrlhf", False), (None, True),
    # SkyRL ``use_ref_model = use_kl_loss or use_kl_in_reward`` else ``ref_model = None`` (NovaSky-AI/SkyRL
    # skyrl/train/trainer.py l.644, 673-688 @2e9c89afceb3ef7963748224373ad88882322c99)
    ("skyrl", False),
    # slime ``with_ref=actor_args.kl_coef != 0 or actor_args.use_kl_loss`` (THUDM/slime slime/ray/placement_group.py
    # l.178 @624b824a898ab0ec1fcb4d373004c7f3852bf515); miles ``with_ref=args.kl_coef != 0 or args.use_kl_loss``
    # (radixark/miles miles/ray/placement_group.py l.150 @748935dc7155d4990d02d62f6061c50ef8054051)
    ("slime", False), ("miles", False),
    # NeMo RL's PPO builds its Policy without init_reference_model (default True): the reference is loaded at
    # kl 0 (NVIDIA-NeMo/RL nemo_rl/algorithms/ppo.py l.762-770, nemo_rl/models/policy/lm_policy.py l.101
    # @7ea279abfbeb698b092856d0dab61e7cf39bc909); only grpo.py gates it (l.1145)
    ("nemo-rl", True),
])
def test_ppo_reference_at_kl_0_follows_the_framework(preset, expected):
    d = merge_under(ppo_tier("fsdp_ckpt"), {"roles": {"kl_coef": 0.0}})
    if preset:
        d["preset"] = preset
    card = load_card_dict(d)
    assert reference_loaded(card) is expected
    assert (reference_placement(card) is not RefPlacement.NONE) is expected
    memory, time, _ = _sides(card)
    assert (memory, time) == (expected, expected)


@pytest.mark.parametrize("preset", [None, "trl", "verl", "openrlhf", "skyrl", "slime", "miles", "nemo-rl"])
def test_grpo_reference_at_kl_0_is_absent_under_every_preset(preset):
    """GRPO at kl 0: TRL ``ref_model = None``, verl ``need_reference_policy`` False, OpenRLHF ``ref_model = None``,
    SkyRL ``ref_model = None`` (trainer.py l.644), slime / miles ``with_ref`` False (placement_group.py l.178 /
    l.150), NeMo RL ``init_reference_model = loss_config.reference_policy_kl_penalty > 0`` (nemo_rl/algorithms/
    grpo.py l.1145 @7ea279abfbeb698b092856d0dab61e7cf39bc909)."""
    d = merge_under(ppo_tier("fsdp_ckpt"), {"method": "grpo", "roles": {"kl_coef": 0.0, "critic": None}})
    if preset:
        d["preset"] = preset
    card = load_card_dict(d)
    assert reference_loaded(card) is False
    assert reference_placement(card) is RefPlacement.NONE


def test_the_card_descriptions_state_the_rules_the_code_applies():
    """spec.card: kl_coef's description names every framework whose PPO reference is gated at kl 0
    (methods.roles.KL_GATED_REFERENCE_PPO_PRESETS) and no longer says that 0 means no reference;
    recompute_old_logprobs' names every OLD_LOGPROB_PRESETS preset, the no-preset TRL rule and mini_batches > 1
    under every preset (methods.roles.old_logprob_pass)."""
    from trainfit.methods.roles import KL_GATED_REFERENCE_PPO_PRESETS, OLD_LOGPROB_PRESETS
    from trainfit.spec.card import RolesSection, RolloutSection

    kl = RolesSection.model_fields["kl_coef"].description
    assert "0 means no reference model" not in kl
    assert all(p in kl for p in KL_GATED_REFERENCE_PPO_PRESETS) and "nemo-rl" in kl
    old = RolloutSection.model_fields["recompute_old_logprobs"].description
    assert all(p in old for p in OLD_LOGPROB_PRESETS)
    assert "no preset" in old and "mini_batches > 1 under every preset" in old


def test_preset_fill_reads_the_preset_card():
    from trainfit.methods.presets import preset_fill

    assert preset_fill("verl", "roles.reference") == "cpu"
    assert preset_fill("trl", "roles.kl_coef") == 0.0
    assert preset_fill("openrlhf", "roles.reference") is None
    assert preset_fill("no-such-preset", "roles.reference") is None


@pytest.mark.parametrize("preset,expected", [
    (None, 0.0), ("trl", 0.0), ("verl", 0.0), ("slime", 0.0), ("miles", 0.0),
    ("openrlhf", 0.01), ("skyrl", 0.001), ("nemo-rl", 0.01),
])
def test_grpo_kl_left_open_takes_the_framework_default(preset, expected):
    """A GRPO card that leaves roles.kl_coef open: the framework's own default (methods.roles.GRPO_DEFAULT_KL_PRESETS:
    OpenRLHF --algo.kl.init_coef 0.01, train_ppo_ray.py l.419 @3c3be623; SkyRL use_kl_loss True, kl_loss_coef 0.001,
    config.py l.606-608 @2e9c89af; NeMo RL grpo_math_1B.yaml l.80 reference_policy_kl_penalty 0.01 @7ea279ab), so the
    reference those frameworks load by default is planned."""
    from trainfit.methods.roles import kl_coef

    d = merge_under(ppo_tier("fsdp_ckpt"), {"method": "grpo", "roles": {"critic": None}})
    if preset:
        d["preset"] = preset
    card = load_card_dict(d)
    assert kl_coef(card) == expected
    assert reference_loaded(card) is (expected > 0)
