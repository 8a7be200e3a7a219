"""benchmarks/step_times.py, RL side: the NeMo RL mapping (reference pass, sequence packing, sleep, fused
kernels) and the generation phase of an entry whose training layout the card refuses."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("trainfit_bench_step_times_rl", REPO / "benchmarks" / "step_times.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


S = _load()
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
    e = RL["verl-grpo-deepseek-v3-671b-h20-96g"]
    rows = S.rl_rows([e], [])
    by_q = {r.quantity: r for r in rows}
    assert by_q["step"].status == "not_representable" and by_q["step"].trainfit_s is None
    gen = by_q["generation"]
    assert gen.status == "mapped" and gen.trainfit_s and gen.trainfit_s > 0
    assert any(n.startswith("generation phase only") for n in gen.notes)
