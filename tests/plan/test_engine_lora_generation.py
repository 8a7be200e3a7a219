"""verl with a LoRA actor generates through the adapter unmerged (vLLM ``enable_lora``, a ``TensorLoRARequest``;
verl-project/verl verl/workers/fsdp_workers.py l.417 @7dc3ee7476c9af1042636f44bca9e412d1de1a6d): the generation
phase carries the punica kernels of every LoRA-wrapped linear; full fine-tuning and other presets do not."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.plan.rl_generation import engine_serves_adapter
from trainfit.spec.card import load_card_dict


def _card(scope: str = "lora", preset: str = "verl") -> dict:
    card = {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": scope, "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 8},
            "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                        "response_len_mean": 200, "cuda_graphs": False}}
    if scope == "lora":
        card["lora"] = {"rank": 32, "alpha": 32}
    return card


def _gen(card: dict) -> float:
    return next(ph.seconds for ph in make_plan(load_card_dict(card)).time.phases if ph.name == "generation")


def test_verl_lora_serves_the_adapter_full_and_other_presets_do_not():
    assert engine_serves_adapter(load_card_dict(_card()))
    assert not engine_serves_adapter(load_card_dict(_card(scope="full")))
    assert not engine_serves_adapter(load_card_dict(_card(preset="trl")))


def test_the_adapters_kernels_lengthen_an_eager_generation(monkeypatch):
    served = _gen(_card())
    # the same run with the adapter merged into the engine's weights: the base model's kernel count
    monkeypatch.setattr("trainfit.plan.rl_generation.engine_serves_adapter", lambda card: False)
    assert served > 1.3 * _gen(_card())
