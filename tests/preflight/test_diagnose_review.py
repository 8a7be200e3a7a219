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
