"""benchmarks/step_times.py, RL side: the NeMo RL mapping (reference pass, sequence packing, sleep, fused
kernels) and the generation phase of an entry whose training layout the card refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


S = load_step_times("trainfit_bench_step_times_rl")
RL = {e["id"]: e for e in json.loads(S.RL_DATA.read_text())}


def test_nemo_rl_colocated_card_states_what_the_framework_runs():
    card, notes = S.map_rl(RL["nemorl-v05-grpo-llama31-8b-h100-bf16-16g-onpol"])
    assert card["roles"] == {"kl_coef": S.NEMO_RL_KL_PENALTY}  # reference log-probs every step
    assert card["rollout"]["sleep_level"] == 1
    assert card["parallel"]["compile"] is True  # Megatron-Core / TE fused kernels
    # packing: 4096-token training micro-batches, 2 x 4096 for log-probs, of prompt + mean response
    per_seq = card["rollout"]["prompt_len"] + card["rollout"]["response_len_mean"]
    assert card["batch"]["micro_batch_size"] == 4096 // per_seq
    assert card["rollout"]["logprob_micro_batch_size"] == 2 * 4096 // per_seq
    assert any("sequence packing" in n for n in notes)


def test_nemo_rl_split_card_does_not_sleep():
    card, _ = S.map_rl(RL["nemorl-v05-grpo-llama31-8b-h100-bf16-16g-off1"])
    assert "sleep_level" not in card["rollout"]


def test_dapo_keeps_no_reference_pass():
    card, _ = S.map_rl(RL["verl-grpo-deepseek-v3-671b-h20-96g"])
    assert card["roles"] == {"kl_coef": 0.0}


def test_refused_training_layout_still_scores_the_generation_phase():
    # the verl DeepSeek-V3 run without its uneven last stage: PP 12 does not divide the 61 layers, so the
    # planner refuses the training layout; per the benchmark's definitions (module docstring) a run the card
    # or the planner cannot state is 'not_representable' (scored by the rule), 'skipped' is for missing data
    e = copy.deepcopy(RL["verl-grpo-deepseek-v3-671b-h20-96g"])
    del e["train"]["num_layers_in_last_pipeline_stage"]
    rows = S.rl_rows([e], ledger := [])
    by_q = {r.quantity: r for r in rows}
    step = by_q["step"]
    assert step.status == "not_representable" and step.trainfit_s is None and step.rule_s
    assert any(n.startswith("planner refused: parallel.pipeline_parallel") for n in step.notes)
    assert ledger[0]["status"] == "not_representable"
    gen = by_q["generation"]
    assert gen.status == "mapped" and gen.trainfit_s and gen.trainfit_s > 0
    assert any(n.startswith("generation phase only") for n in gen.notes)


def test_uneven_end_stages_reach_the_card_and_the_run_plans():
    # verl run_deepseek671b_math_megatron_96gb.sh LAST_LAYER=6; NeMo RL grpo-deepseek-v3-32n8g.yaml 3 / 2
    card, _ = S.map_rl(RL["verl-grpo-deepseek-v3-671b-h20-96g"])
    assert card["parallel"]["pipeline_last_stage_layers"] == 6
    assert "pipeline_first_stage_layers" not in card["parallel"]
    card, _ = S.map_rl(RL["nemorl-v05-grpo-dsv3-h100-bf16-256g-onpol"])
    assert (card["parallel"]["pipeline_first_stage_layers"], card["parallel"]["pipeline_last_stage_layers"]) == (3, 2)
    rows = S.rl_rows([RL["nemorl-v05-grpo-dsv3-h100-bf16-256g-onpol"]], [])
    assert rows[0].status == "mapped" and rows[0].trainfit_s > 0


def test_nemo_rl_context_parallel_pads_to_tp_x_2_x_cp():
    e = RL["nemorl-v05-dapo-dsv3-h100-bf16-512g-onpol"]  # TP 8, CP 4: make_sequence_length_divisible_by 64
    # without its max_model_len cap (data.sequence_len_max 1536, a multiple of 64: nothing left to pad), the longest
    # sequence is prompt + 1536 and gets padded
    e = {**e, "data": {k: v for k, v in e["data"].items() if k != "sequence_len_max"}}
    card, notes = S.map_rl(e)
    ro = card["rollout"]
    assert (ro["prompt_len"] + ro["response_len"]) % 64 == 0
    assert any("pads sequences to a multiple of TP x 2 x CP = 64" in n for n in notes)
    verl = RL["verl-grpo-deepseek-v3-671b-h20-96g"]  # not NeMo RL: no padding
    assert S.nemo_rl_cp_padding(verl, {"prompt_len": 3, "response_len": 8})[0]["prompt_len"] == 3


def test_verl_reference_log_prob_batch_and_trainer_offload_reach_the_card():
    card, _ = S.map_rl(RL["playverl-ppo-qwen25-05b-h100-8g"])  # use_kl False, fixed log-prob micro-batch 8
    assert card["roles"] == {"kl_coef": 0.0}
    assert card["rollout"]["logprob_micro_batch_size"] == 8
    card, _ = S.map_rl(RL["playverl-ppo-qwen2-7b-min-h100-8g"])  # actor and reference offloaded between passes
    assert card["roles"] == {"kl_coef": 0.001, "reference": "cpu"}
    assert card["rollout"]["trainer_offload"] == "params_and_optimizer"
    card, notes = S.map_rl(RL["playverl-ppo-qwen2-7b-rec-h100-8g"])
    # ref.fsdp_config.param_offload False, but verl's FSDP reference is always wrapped with FSDP CPUOffload
    assert card["roles"] == {"kl_coef": 0.001, "reference": "cpu"} and "trainer_offload" not in card["rollout"]
    assert any("CPUOffload(offload_params=True)" in n for n in notes)
    assert S.reference_roles({"ref_param_offload": False})[0] == {"reference": "gpu"}


def test_verl_grpo_with_kl_loss_plans_the_reference_pass():
    # use_kl_loss True (low_var_kl 0.001): verl computes ref log-probs every step; a GRPO card's KL defaults to 0
    e = RL["rocm-verl-grpo-deepseek-llm-7b-mi300x-8g"]
    card, _ = S.map_rl(e)
    assert card["roles"]["kl_coef"] == S.VERL_KL_LOSS_COEF
    planned = S.plan_card(card)
    assert planned.parts["time.ref_logprob"] > 0
    assert S.phase_seconds(planned, "logprob")[1] == ["time.old_logprob", "time.ref_logprob"]


def test_an_entry_with_published_means_scores_every_phase_in_its_subset():
    rows = S.rl_rows([RL["playverl-grpo-qwen25-05b-h100-8g"]], [])
    assert {r.quantity: r.subset for r in rows} == {
        "step": "RL step", "generation": "RL phase: generation", "logprob": "RL phase: log-prob passes",
        "actor_update": "RL phase: actor update"}
    assert all(r.status == "mapped" and r.trainfit_s and r.trainfit_s > 0 for r in rows)
    logprob = next(r for r in rows if r.quantity == "logprob")
    assert logprob.published_s == RL["playverl-grpo-qwen25-05b-h100-8g"]["measured"]["phases_s"]["old_logprob"] + \
        RL["playverl-grpo-qwen25-05b-h100-8g"]["measured"]["phases_s"]["ref_logprob"]


def test_an_inline_model_config_keeps_the_layout_it_states():
    card, notes = S.map_rl(RL["rocm-verl-ppo-deepseek-llm-7b-mi300x-8g"])  # deepseek-llm-7b: a LLaMA layout
    assert card["model"]["config"]["model_type"] == "llama"
    assert "inline model_config (llama layout, as the entry states)" in notes
    model, notes = S.resolve_model("x/qwen1-like", {"hidden_size": 8, "num_experts": None})  # no model_type: qwen2
    assert model["config"] == {"hidden_size": 8, "model_type": "qwen2"} and "Qwen-1 layout" in notes[0]


def test_verl_critic_without_remove_padding_computes_padded_sequences():
    # critic use_remove_padding False, dynamic batches of 32768 real tokens (verl_qwen2_7b_recommended.log):
    # every sequence padded to 512 + 1024 tokens; the actor's passes stay packed
    e = RL["playverl-ppo-qwen2-7b-rec-h100-8g"]
    card, _ = S.map_rl(e)
    packed = S.plan_card(card)
    padded = S.plan_card(card)
    notes = S.apply_role_passes(e, card, padded)
    assert any("critic use_remove_padding False" in n and "512 + 1024" in n for n in notes)
    assert padded.parts["time.critic_update"] > 3 * packed.parts["time.critic_update"]
    assert padded.parts["time.actor_update"] == packed.parts["time.actor_update"]
    grown = padded.parts["time.critic_update"] + padded.parts["time.critic_values"] \
        - packed.parts["time.critic_update"] - packed.parts["time.critic_values"]
    assert abs(padded.step_s - packed.step_s - grown) < 1e-6
    # an entry that states nothing about padding keeps the packed plan
    assert S.role_pass_cards(RL["rocm-verl-grpo-deepseek-llm-7b-mi300x-8g"], card) == []


def test_verl_generation_timer_covers_the_weight_sync_and_sleep_wake():
    rows = S.rl_rows([RL["playverl-ppo-qwen2-7b-rec-h100-8g"]], [])
    gen = next(r for r in rows if r.quantity == "generation")
    assert set(gen.parts_used) == {"time.generation", "time.weight_sync", "time.sleep_wake"}


def test_verl_offload_is_counted_in_the_calls_that_move_it():
    e = RL["playverl-ppo-qwen2-7b-min-h100-8g"]  # actor param_offload and optimizer_offload
    shares = {q: S.offload_share(e, q) for q in ("generation", "logprob", "actor_update", "weight_sync")}
    assert shares == {"generation": 0.2, "logprob": 0.2, "actor_update": 0.6, "weight_sync": 0.0}
    assert S.offload_share(RL["playverl-ppo-qwen2-7b-rec-h100-8g"], "actor_update") == 0.0  # nothing offloaded
    rows = {r.quantity: r for r in S.rl_rows([e], [])}
    card, _ = S.map_rl(e)
    planned = S.plan_card(card)
    moved = planned.parts["time.state_offload"]
    assert rows["actor_update"].trainfit_s == pytest.approx(planned.parts["time.actor_update"] + 0.6 * moved)
    assert rows["step"].trainfit_s > 0 and "time.state_offload" in rows["logprob"].parts_used


def test_nemo_rl_refit_timer_counts_the_to_host_half_of_the_offload():
    """NeMo RL v0.3's prepare_for_generation timer moves the trainer state to the host only (offload_before_refit /
    offload_after_refit); the way back runs under logprob_inference_prep and training_prep. The entry names the
    plan's to_host term, not a share of the round trip, whose two directions the plan prices differently."""
    e = next(x for x in S.load_entries(S.RL_DATA) if x["id"] == "nemorl-v03blog-grpo-llama31-70b-megatron-h100-64g")
    assert S.offload_terms(e, "weight_sync") == ("to_host",) and S.offload_share(e, "weight_sync") == 0.0
    assert S.offload_terms(RL["playverl-ppo-qwen2-7b-min-h100-8g"], "actor_update") == ()
    card, _ = S.map_rl(e)
    planned = S.plan_card(card)
    to_host = planned.phase_terms["state_offload"]["to_host"]
    assert 0 < to_host < planned.parts["time.state_offload"]
    row = next(r for r in S.rl_rows([e], []) if r.quantity == "weight_sync")
    # the wake half of sleep_wake: the sleep runs in the generation timer (finish_generation)
    expected = planned.parts["time.weight_sync"] + planned.phase_terms["sleep_wake"]["wake"] + to_host
    assert row.trainfit_s == pytest.approx(expected)
    assert "time.state_offload" in row.parts_used


def _planned_without_an_old_policy_pass(e: dict):
    """The entry's card with its old-policy pass off: (the plan, its state_offload seconds, the scored rows)."""
    e = copy.deepcopy(e)
    e["train"]["old_logprob_pass"] = False
    card, _ = S.map_rl(e)
    planned = S.plan_card(card)
    return planned, planned.parts["time.state_offload"], {r.quantity: r for r in S.rl_rows([e], [])}


def test_verl_megatron_offload_without_an_old_policy_pass_splits_two_weights_trips():
    """The plan prices three Megatron weights round trips with an old-policy pass and two without (the update's and
    the sync's); the timers' shares follow (``VERL_MEGATRON_OFFLOAD_SHARES`` / ``_NO_OLD_LOGPROB``)."""
    e = next(x for x in S.load_entries(S.RL_DATA) if x["id"] == "verl-one-step-off-dapo-qwen25math7b-h20-colocate-megatron")
    assert S.offload_share(e, "logprob") == pytest.approx(1 / 3)
    shares = {q: S.offload_share(e, q, old_logprob=False) for q in ("generation", "logprob", "actor_update")}
    assert shares == {"generation": 0.5, "logprob": 0.0, "actor_update": 0.5}
    planned, moved, rows = _planned_without_an_old_policy_pass(e)
    assert rows["actor_update"].trainfit_s == pytest.approx(planned.parts["time.actor_update"] + 0.5 * moved)
    assert rows["generation"].notes and any("50% of the plan's trainer state offload" in n
                                            for n in rows["generation"].notes)


def test_verl_fsdp_offload_without_an_old_policy_pass_splits_two_weights_trips():
    """FSDP as Megatron: the plan prices two weights trips without an old-policy pass (``w = weights * 2``), so the
    timers split update (12 B: fp32 shard + moments) : sync (4 B) = 0.75 : 0.25 and the log-prob timer gets none
    (``VERL_FSDP_OFFLOAD_SHARES_NO_OLD_LOGPROB``)."""
    e = next(x for x in S.load_entries(S.RL_DATA) if x["id"] == "verl-one-step-off-dapo-qwen25math7b-h20-colocate-fsdp2")
    assert [S.offload_share(e, q) for q in ("actor_update", "logprob", "generation")] == [0.6, 0.2, 0.2]
    shares = {q: S.offload_share(e, q, old_logprob=False) for q in ("generation", "logprob", "actor_update")}
    assert shares == {"generation": 0.25, "logprob": 0.0, "actor_update": 0.75}
    assert sum(shares.values()) == pytest.approx(1.0)
    planned, moved, rows = _planned_without_an_old_policy_pass(e)
    assert rows["actor_update"].trainfit_s == pytest.approx(planned.parts["time.actor_update"] + 0.75 * moved)
