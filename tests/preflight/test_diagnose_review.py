"""`diagnose`: a log without a card computes no fixes and says so; a match in the traceback's own phase
ranks above a match in another phase."""

from __future__ import annotations

from pathlib import Path

from helpers import invoke
from trainfit.preflight.diagnose import diagnose_log
from trainfit.spec.card import load_card_dict

LOGS = Path(__file__).parent / "data" / "logs"
GRPO = {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "trl", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
        "rollout": {"num_generations": 8, "prompts_per_step": 64, "prompt_len": 512, "response_len": 4096,
                    "gpu_memory_utilization": 0.9}}


def test_a_log_without_a_card_says_no_fixes_were_computed():
    res = invoke("diagnose", "--log", LOGS / "backward_oom.log")
    assert res.exit_code == 0
    assert "no single-variable change saves memory there" not in res.output
    assert "fixes: none computed (no card: --card re-plans one-variable changes at its shapes)" in res.output.splitlines()


def test_a_log_with_a_card_computes_the_fixes():
    d = diagnose_log((LOGS / "backward_oom.log").read_text(), load_card_dict({"model": "Qwen/Qwen3-0.6B"}))
    assert d.fixes_computed and not diagnose_log((LOGS / "backward_oom.log").read_text()).fixes_computed


def test_matches_in_the_tracebacks_phase_rank_first():
    """vLLM's execute_model fails in rollout: a 4.56 GiB FSDP buffer of actor_backward was listed first."""
    d = diagnose_log((LOGS / "trl_vllm_execute_model_oom.log").read_text(), load_card_dict(GRPO))
    assert d.phase_hint == "rollout"
    assert d.matches and all(m.phase == "rollout" for m in d.matches)


def _verl_backward_log(total_gib: str) -> str:
    import json

    logs = json.loads((Path(__file__).parent / "data" / "oom_tracebacks.json").read_text())["logs"]
    log = next(x["log"] for x in logs if x["id"] == "verl-update-actor-backward")
    return log.replace("total capacity of 79.19 GiB", f"total capacity of {total_gib} GiB")


SMALL_GRPO = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "preset": "verl",
              "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "parallel": {"strategy": "single"},
              "rollout": {"num_generations": 4, "prompts_per_step": 8, "prompt_len": 256, "response_len": 512}}


def _card(data):
    from trainfit.methods.presets import apply_preset

    return load_card_dict(apply_preset(dict(data), str(data["preset"])))


def test_a_log_far_above_the_plan_says_the_card_is_not_the_run():
    """The log's 20.11 GiB allocated by PyTorch in actor_backward against a plan whose actor_backward allocates a
    few GiB: the measured figures were parsed and never compared, and 'fits' fixes saving 0.00 GiB were ranked."""
    card = _card(SMALL_GRPO)
    d = diagnose_log(_verl_backward_log("23.99"), card)
    assert d.phase_hint == "actor_backward"
    assert d.card_mismatch is not None
    assert "held 22.96 GiB, 20.11 GiB allocated by PyTorch" in d.card_mismatch
    assert "the plan's actor_backward is" in d.card_mismatch and "does not describe this run" in d.card_mismatch
    assert all(f.saved_bytes >= 0.01 * 2**30 for f in d.fixes)
    from trainfit.cli.diagnose_cmd import render

    lines = render(d).splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("card mismatch: "))
    assert first < min(i for i, ln in enumerate(lines) if ln.startswith(("symptom:", "note:", "matches", "nearest")))


def test_a_log_the_plan_accounts_for_is_not_flagged():
    """The same log against a card whose actor_backward allocates more than the log held: no mismatch line."""
    card = _card({**SMALL_GRPO, "model": "Qwen/Qwen3-8B", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1}})
    d = diagnose_log(_verl_backward_log("79.19"), card)
    assert d.phase_hint == "actor_backward" and d.card_mismatch is None


def test_fixes_that_save_nothing_on_a_card_that_fits_are_not_listed():
    """On a card that already fits, every re-planned change 'fits': rollout.logprob_micro_batch_size, the engine's
    gpu_memory_utilization and parallel.offload save 0.00 GiB in actor_backward here and were ranked as fixes."""
    from trainfit.plan import make_plan
    from trainfit.preflight.diagnose import FIX_MIN_SAVING_BYTES, quantify_fixes

    card = _card({**SMALL_GRPO, "batch": {"micro_batch_size": 4}})
    plan = make_plan(card)
    assert plan.fits
    fixes = quantify_fixes(card, plan, "actor_backward")
    assert fixes and all(f.saved_bytes >= FIX_MIN_SAVING_BYTES for f in fixes)
    assert not any(f.change.startswith("rollout.gpu_memory_utilization") for f in fixes)
