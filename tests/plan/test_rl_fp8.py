"""An fp8 RL card (NeMo RL's fp8 recipes): vLLM fp8 generation, its refit cast, fp8 log-prob and update passes."""

from __future__ import annotations

import trainfit.plan.rl_passes as rl_passes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(quant: str, compute: str = "bf16"):
    precision = {"compute": compute} | ({"fp8_recipe": "blockwise"} if compute == "fp8" else {})
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "compile": True}, "precision": precision, "batch": {"micro_batch_size": 3},
        "rollout": {"placement": "split", "nodes": 1, "gpu_memory_utilization": 0.8, "prompts_per_step": 64,
                    "num_generations": 32, "prompt_len": 128, "response_len": 4096, "response_len_mean": 1100,
                    "async_mode": "one_step_off", "quantization": quant, "logprob_micro_batch_size": 6},
    })


def _phases(card):
    return {p.name: p for p in make_plan(card).time.phases}


def test_fp8_generation_is_faster_and_its_refit_casts():
    bf16, fp8 = _phases(_card("none")), _phases(_card("fp8"))
    assert fp8["generation"].seconds < 0.95 * bf16["generation"].seconds
    # the trainer sends the same bf16 bytes; each engine rank casts 7.0e9 weights (49 B each) on arrival
    assert fp8["weight_sync"].seconds > bf16["weight_sync"].seconds
    # training untouched by the engine's format
    assert fp8["actor_update"].seconds == bf16["actor_update"].seconds
    note = [n for n in make_plan(_card("fp8")).time.assumptions if n.startswith("rollout engine in fp8")]
    assert len(note) == 1 and "8.46 GiB of weights per rank" in note[0] and "casts 6.98B weights" in note[0]
    assert not [n for n in make_plan(_card("none")).time.assumptions if n.startswith("rollout engine in")]


def test_fp8_training_runs_its_logprob_passes_in_fp8(monkeypatch):
    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append((kwargs["fp8"], kwargs["fp8_weight_cache"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    fp8 = _phases(_card("fp8", compute="fp8"))
    assert seen and set(seen) == {(True, True)}  # blockwise: Transformer Engine caches the fp8 weights
    seen.clear()
    bf16 = _phases(_card("fp8"))
    assert set(seen) == {(False, False)}
    # packed micro-batches under fused kernels (the NeMo RL rows' shape): GEMM-bound, so fp8 is faster
    assert fp8["old_logprob"].seconds < bf16["old_logprob"].seconds
    assert fp8["actor_update"].seconds < bf16["actor_update"].seconds


def test_logprob_passes_take_the_cards_casts_as_training_does(monkeypatch):
    """A torchao current-scaling card (not Megatron-Core, compiled) casts with torchao's compiled float8 casts in its
    log-prob passes as in its update (plan.time.fp8_casts_of), not with Transformer Engine's."""
    from trainfit.compute.float8_casts import TORCHAO_COMPILED
    from trainfit.plan.time import fp8_casts_of

    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append(kwargs["fp8_casts"])
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    card = load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "compile": True},
        "precision": {"compute": "fp8", "fp8_recipe": "current"}, "batch": {"micro_batch_size": 3},
        "rollout": {"placement": "split", "nodes": 1, "gpu_memory_utilization": 0.8, "prompts_per_step": 64,
                    "num_generations": 32, "prompt_len": 128, "response_len": 4096, "response_len_mean": 1100,
                    "async_mode": "one_step_off", "logprob_micro_batch_size": 6},
    })
    _phases(card)
    assert fp8_casts_of(card) is TORCHAO_COMPILED
    assert seen and all(c is TORCHAO_COMPILED for c in seen)
