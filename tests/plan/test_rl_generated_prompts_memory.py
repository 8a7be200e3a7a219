"""rollout.generated_prompts_per_step (DAPO dynamic sampling): the engine generates the whole batch of generated
prompts at once (NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py dynamic_sampling @9dbd9adc), so the engine's sequences in
flight, the hf engine's KV cache and the phase's label follow the generated prompts, as the generation time does;
the trainer's passes keep prompts_per_step."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(generated: int | None, engine: str = "vllm", calls: int = 1) -> dict:
    ro = {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 256,
          "response_len": 4096, "response_len_mean": 1000, "engine": engine, "generation_calls": calls}
    if engine == "vllm":
        ro |= {"gpu_memory_utilization": 0.15, "max_num_seqs": 1024}
    if generated is not None:
        ro["generated_prompts_per_step"] = generated
    return {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full", "preset": "trl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4, "nodes": 1},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1}, "rollout": ro}


def test_vllm_demand_counts_every_generated_prompt():
    kept, generated = make_plan(load_card_dict(_card(None))), make_plan(load_card_dict(_card(96)))
    assert generated.rollout.needed_concurrency == 3 * kept.rollout.needed_concurrency == 192  # 4 engines, 24 prompts x 8 each
    assert generated.rollout.demand_tokens == 3 * kept.rollout.demand_tokens
    # the whole generated batch overflows the 0.15 x 80 GB engine where the kept prompts alone do not
    assert generated.rollout.preempts and not kept.rollout.preempts


def test_generation_calls_split_the_generated_prompts():
    one, four = make_plan(load_card_dict(_card(96))), make_plan(load_card_dict(_card(96, calls=4)))
    assert four.rollout.needed_concurrency * 4 == one.rollout.needed_concurrency


def test_hf_engine_cache_holds_the_generated_batch():
    def rollout_bytes(generated):
        p = make_plan(load_card_dict(_card(generated, engine="hf")))
        return {ph.phase.value: ph.device for ph in p.groups[0].phases}["rollout"], p
    (kept, pk), (gen, pg) = rollout_bytes(None), rollout_bytes(64)
    assert gen > kept  # 64 more sequences x 4352 tokens of KV per step, 16 more per GPU
    assert pg.rollout.demand_tokens == 2 * pk.rollout.demand_tokens
    labels = {ph.phase.value: ph.at for ph in pg.groups[0].phases}
    assert "generating 64x8 sequences" in labels["rollout"]
