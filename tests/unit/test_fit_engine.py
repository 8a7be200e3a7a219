"""`fit` on RL cards tries vLLM's max_num_seqs / max_num_batched_tokens and the log-prob micro-batch
around each count's best plan: the refined row replaces it only when strictly better and is the plan
of its own knobs; pinned engine knobs are not varied."""

import pytest

from trainfit.fit_search import ENGINE_SPACE
from trainfit.objective import Goal, rank_key
from trainfit.plan import make_plan
from trainfit.search import fit
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import updated

# 32 prompts x 16 completions of up to 2048 tokens: the engine's scheduler limits change the step
BASE = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora",
        "rollout": {"prompt_len": 256, "response_len": 2048, "num_generations": 16, "prompts_per_step": 32}}
PINNED = frozenset({"model", "method", "scope", "parallel.offload", "precision.optimizer", "loss.chunked",
                    "batch.micro_batch_size", "rollout.prompt_len", "rollout.response_len", "rollout.num_generations",
                    "rollout.prompts_per_step", "rollout.placement", "rollout.tensor_parallel",
                    "rollout.gpu_memory_utilization", "rollout.sleep_level", "rollout.cuda_graphs"})


def test_the_engine_refinement_only_improves_and_its_rows_are_plans_of_their_knobs():
    goal = Goal()
    free = fit(BASE, gpus=["a100-40gb"], max_gpus=2, pinned=PINNED, workers=1)
    held = fit(BASE, gpus=["a100-40gb"], max_gpus=2, pinned=PINNED | set(ENGINE_SPACE), workers=1)
    assert free.evaluated > held.evaluated  # the refinement planned more
    by = {r.gpus: r for r in held.rows}
    improved = False
    for r in free.rows:
        assert rank_key(r, goal)[:-1] <= rank_key(by[r.gpus], goal)[:-1]
        refined = any(k in r.knobs for k in ENGINE_SPACE)
        assert refined == (rank_key(r, goal)[:-1] < rank_key(by[r.gpus], goal)[:-1])
        improved |= refined
        knobs = {k: v for k, v in r.knobs.items() if k not in ("hardware.gpu", "gpus")}
        data = updated(BASE, knobs | {"hardware.gpu": "a100-40gb", "hardware.gpus_per_node": r.gpus})
        assert make_plan(load_card_dict(data)).step_seconds == pytest.approx(r.step_seconds)
    assert improved  # the default scheduler limits are not the fastest here


def test_pinned_engine_knobs_are_not_varied():
    pins = PINNED | {"rollout.max_num_seqs"}
    result = fit(updated(BASE, {"rollout.max_num_seqs": 96}), gpus=["a100-40gb"], max_gpus=1, pinned=pins, workers=1)
    assert result.rows and all("rollout.max_num_seqs" not in r.knobs for r in result.rows)
    assert all(r.knobs.get("rollout.max_num_seqs", 96) == 96 for r in result.rows)
