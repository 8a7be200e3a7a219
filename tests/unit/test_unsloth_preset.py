"""``preset: unsloth`` plans Unsloth's GRPO on one GPU (trainfit.methods.unsloth): TRL's order with vLLM in process and
colocated, the engine built on the trainer's one copy of the base weights (counted once, at the trainer's storage
precision), the engine serving the LoRA adapter (adapter-only handover, decode through its LoRA kernels); more than one
GPU is refused with one line naming the fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainfit import api
from trainfit.methods.presets import PRESETS, apply_preset, preset
from trainfit.methods.unsloth import REFUSED_PRESETS, UNSLOTH_MULTI_GPU_REFUSAL, engine_shares_trainer_weights
from trainfit.spec.card import RunCard

CARD = {
    "model": "Qwen/Qwen2.5-3B", "method": "grpo", "scope": "qlora", "lora": {"rank": 64, "alpha": 64},
    "hardware": {"gpu": "t4"}, "precision": {"compute": "fp16", "weights": "nf4"},
    "batch": {"micro_batch_size": 8},
    "rollout": {"gpu_memory_utilization": 0.9, "prompts_per_step": 1, "num_generations": 8, "prompt_len": 256,
                "response_len": 200},
    "roles": {"reference": "lora_disabled", "kl_coef": 0.04},
}


def _plan(name: str, **hardware):
    card = {**CARD, "preset": name, "hardware": {**CARD["hardware"], "gpus_per_node": 1, **hardware}}
    return api.plan(card)


def test_the_preset_is_planned_not_refused() -> None:
    assert "unsloth" in PRESETS and "unsloth" not in REFUSED_PRESETS
    p = preset("unsloth")
    assert p.card["rollout"] == {"engine": "vllm", "placement": "colocate", "sleep_level": 0}
    assert p.card["parallel"]["strategy"] == "single" and p.card["parallel"]["gradient_checkpointing"]
    assert "027b5100c7492bce025fe2f03681f440843e4666" in p.source
    filled = apply_preset({"method": "grpo"}, "unsloth")
    assert filled["hardware"]["gpus_per_node"] == 1 and filled["hardware"]["nodes"] == 1
    assert engine_shares_trainer_weights("unsloth") and not engine_shares_trainer_weights("trl")


@pytest.mark.parametrize("hardware", [{"gpus_per_node": 2}, {"gpus_per_node": 1, "nodes": 2}])
def test_more_than_one_gpu_is_refused_with_one_line(hardware: dict) -> None:
    with pytest.raises(ValidationError) as exc:
        RunCard(method="grpo", preset="unsloth", hardware=hardware)
    assert UNSLOTH_MULTI_GPU_REFUSAL in str(exc.value)
    assert "\n" not in UNSLOTH_MULTI_GPU_REFUSAL and "hardware.gpus_per_node" in UNSLOTH_MULTI_GPU_REFUSAL


def _rollout_engine_bytes(plan) -> float:
    (rollout,) = [ph for ph in plan.groups[0].phases if ph.phase.value == "rollout"]
    return rollout.components["rollout_engine"]


def test_the_base_weights_are_counted_once_at_the_trainers_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's weights are the trainer's nf4 copy: sized at nf4 (the KV cache is what they leave of the budget,
    so it is larger than beside TRL's own bf16 engine copy) and left out of the engine's bytes, which the trainer's
    weights already count. Without the sharing the engine's component grows by exactly those weights."""
    from trainfit.memory.engine_lora import engine_lora_slot_bytes
    from trainfit.methods import rl

    uns, trl = _plan("unsloth"), _plan("trl")
    assert uns.rollout.engine_weights_bytes < trl.rollout.engine_weights_bytes / 2.5  # nf4 against bf16
    assert uns.rollout.kv_cache_bytes > trl.rollout.kv_cache_bytes
    shared = _rollout_engine_bytes(uns)
    monkeypatch.setattr(rl, "engine_shares_trainer_weights", lambda preset: False)
    own_copy = _rollout_engine_bytes(_plan("unsloth"))
    slot = engine_lora_slot_bytes(uns.spec, max_lora_rank=64, max_loras=1, tp=1)
    # (the KV cache is whole blocks, so the budget left to it rounds: within 0.1 %)
    assert own_copy - shared == pytest.approx(uns.rollout.engine_weights_bytes - slot, rel=1e-3)


def test_the_engine_serves_the_adapter_and_the_handover_is_adapter_only() -> None:
    """Each generate call hands vLLM the trainer's adapter (no weight sync): the sync phase moves the adapter alone
    (well under a second, where TRL's merged-weight sync moves the whole model) and the decode runs the engine's LoRA
    kernels (the generation is slower than TRL's on the same engine settings, which decodes the merged weights)."""
    from trainfit.plan.rl_generation import engine_serves_adapter

    uns, trl = _plan("unsloth"), _plan("trl")
    assert engine_serves_adapter(uns.card) and not engine_serves_adapter(trl.card)
    t = {x.name: x.seconds for x in uns.time_phases}
    assert 0 < t["weight_sync"] < 0.1
    assert any("shares the trainer's base weights" in a for a in uns.assumptions)


def test_an_rl_card_without_an_adapter_is_refused() -> None:
    """Unsloth hands vLLM the adapter over the shared frozen base (load_lora): no full-parameter path to the engine."""
    with pytest.raises(ValidationError, match="scope: 'full' with preset unsloth .*; allowed: lora, qlora"):
        RunCard(method="grpo", preset="unsloth", scope="full", hardware={"gpus_per_node": 1})


def test_the_efficient_grpo_loss_holds_one_sequences_logits_not_the_batchs() -> None:
    """``loss.kernel: unsloth`` (the preset's default from Unsloth 2025.3.8): UnslothEfficientGRPO makes the policy's and
    the reference's logits and the policy logits' gradient for one sequence at a time (unsloth-zoo rl_replacements.py
    l.100-236 @a5c5bcee93f9a094d6ebe99568ffd91532c331e8, n_chunks -1 = bsz), so the loss's logits do not grow with the
    batch; without the kernel (a 2025.2 release: TRL's own log-probs) the 3B card keeps its full logits."""
    from trainfit.memory.logits import UNSLOTH_GRPO_CHUNK_LOGIT_COPIES, unsloth_efficient_grpo_bytes

    assert apply_preset({"method": "grpo"}, "unsloth")["loss"] == {"chunked": True, "kernel": "unsloth"}
    assert "loss" not in apply_preset({"method": "sft"}, "unsloth")
    # a card stating loss.chunked keeps its own loss (the CLI's embedded default card states chunked false)
    assert apply_preset({"method": "grpo", "loss": {"chunked": False}}, "unsloth")["loss"] == {"chunked": False}
    assert apply_preset({"method": "grpo", "loss": {"compiled": False}}, "unsloth")["loss"]["kernel"] == "unsloth"
    one = unsloth_efficient_grpo_bytes(sequences=1, seq_len=456, hidden_size=2048, vocab_size=151936)
    eight = unsloth_efficient_grpo_bytes(sequences=8, seq_len=456, hidden_size=2048, vocab_size=151936)
    chunk = UNSLOTH_GRPO_CHUNK_LOGIT_COPIES * 456 * 151936 * 2
    assert one.forward_peak == chunk + 2 * 456 * 2048 * 2 and one.backward_peak == 0.0
    assert eight.forward_peak - one.forward_peak == 2 * 7 * 456 * 2048 * 2  # hidden rows only, no logits
    assert eight.retained == 8 * 456 * 2048 * 2  # grad_inputs, saved for the backward

    def logits_at_peak(loss: dict) -> float:
        p = api.plan({**CARD, "preset": "unsloth", "hardware": {**CARD["hardware"], "gpus_per_node": 1},
                      "rollout": {**CARD["rollout"], "gpu_memory_utilization": 0.4966}, "loss": loss})
        return max(ph.components.get("logits", 0.0) for ph in p.groups[0].phases), p.fits

    efficient, fits = logits_at_peak({"chunked": True, "kernel": "unsloth"})
    trl, fits_trl = logits_at_peak({"chunked": False, "kernel": "liger"})
    assert efficient < 0.5 * 2**30 < 2 * 2**30 < trl
    assert fits and not fits_trl


def test_the_unsloth_kernel_is_refused_outside_the_unsloth_grpo_card() -> None:
    with pytest.raises(ValidationError) as exc:
        RunCard(method="grpo", preset="trl", loss={"chunked": True, "kernel": "unsloth"})
    assert "loss.kernel: 'unsloth' is Unsloth's GRPO loss, read with method grpo and preset unsloth" in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        RunCard(method="grpo", preset="unsloth", hardware={"gpus_per_node": 1}, loss={"kernel": "unsloth"})
    assert "loss.kernel: 'unsloth' is Unsloth's chunked GRPO loss (no full logits), read with loss.chunked true" \
        in str(exc.value)


def test_an_fp8_engine_over_a_qlora_base_is_refused_with_one_line() -> None:
    """Unsloth refuses load_in_fp8 beside load_in_4bit (unsloth @015bdef0 unsloth/models/loader_utils.py l.780-783):
    before the refusal this card reached generation_time with rank_weight_bytes twice (TypeError)."""
    from trainfit.methods.unsloth import UNSLOTH_FP8_QLORA_REFUSAL

    card = {**CARD, "preset": "unsloth", "hardware": {"gpu": "l4", "gpus_per_node": 1},
            "precision": {"compute": "bf16", "weights": "nf4"},
            "rollout": {**CARD["rollout"], "quantization": "fp8"}, "software": {"bitsandbytes": "0.45.2"}}
    with pytest.raises(ValidationError) as exc:
        RunCard(**card)
    assert UNSLOTH_FP8_QLORA_REFUSAL in str(exc.value) and "\n" not in UNSLOTH_FP8_QLORA_REFUSAL
    # the same engine over a 16-bit LoRA base (Unsloth's fp8 LoRA) is not refused by this check
    RunCard(**{**card, "scope": "lora", "precision": {"compute": "bf16"}})


REVIEW_CARD = {
    "model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "qlora", "preset": "unsloth", "lora": {"rank": 32, "alpha": 64},
    "hardware": {"gpu": "l40s", "gpus_per_node": 1, "nodes": 1}, "batch": {"micro_batch_size": 8},
    "rollout": {"prompts_per_step": 1, "num_generations": 8, "prompt_len": 512, "response_len": 4096},
}


@pytest.mark.parametrize("method", ["grpo", "sft", "dpo"])
def test_the_preset_offloads_the_checkpointed_layer_inputs(method: str) -> None:
    """use_gradient_checkpointing='unsloth' (FastLanguageModel.get_peft_model's default from 2025.7.4, unslothai/unsloth
    3824a6ad789ff707965072a06eb67d9205073634; set by the notebooks before it) keeps each checkpointed layer input on the
    host (unsloth-zoo gradient_checkpointing.py ``hidden_states.to("cpu", non_blocking = True)`` then
    ``ctx.save_for_backward(saved_hidden_states)``, l.145 / l.148 @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de): the preset
    plans parallel.activation_offload for every method, unless the card states it or turns checkpointing off."""
    assert apply_preset({"method": method}, "unsloth")["parallel"]["activation_offload"] is True
    stated = apply_preset({"method": method, "parallel": {"activation_offload": False}}, "unsloth")
    assert stated["parallel"]["activation_offload"] is False
    no_ckpt = apply_preset({"method": method, "parallel": {"gradient_checkpointing": False}}, "unsloth")
    assert "activation_offload" not in no_ckpt["parallel"]
    assert "activation_offload" not in apply_preset({"method": method}, "trl").get("parallel", {})


def test_the_review_card_fits_with_the_checkpoints_on_the_host() -> None:
    """Qwen3-8B GRPO QLoRA on one L40S, micro-batch 8 x 4608 tokens: with the layer inputs on the GPU the plan said
    'does not fit' (about 48 GiB of 44.5); Unsloth keeps them on the host, 36 layers x 8 x 4608 x 4096 x 2 B =
    10.1 GiB, which the plan now counts in host RAM, not on the device."""
    on_host = api.plan(REVIEW_CARD)
    on_gpu = api.plan({**REVIEW_CARD, "parallel": {"activation_offload": False}})
    inputs = 36 * 8 * 4608 * 4096 * 2
    assert on_host.fits and not on_gpu.fits
    assert on_host.host_ram.get("activations", 0.0) >= inputs
    assert "activations" not in on_gpu.host_ram
    assert on_gpu.peak.allocated - on_host.peak.allocated > 0.9 * inputs


def test_the_assumption_names_the_trainer_of_the_method() -> None:
    """An SFT plan under preset unsloth states Unsloth's SFT path (TRL's SFTTrainer), not the GRPO trainer's."""
    sft = api.plan({"model": "Qwen/Qwen2.5-3B", "method": "sft", "scope": "lora", "preset": "unsloth",
                    "hardware": {"gpu": "a10g", "gpus_per_node": 1}})
    grpo = api.plan(REVIEW_CARD)
    (sft_line,) = [a for a in sft.assumptions if a.startswith("preset unsloth:")]
    (grpo_line,) = [a for a in grpo.assumptions if a.startswith("preset unsloth:")]
    assert "SFTTrainer" in sft_line and "GRPOTrainer" not in sft_line and "vLLM" not in sft_line
    assert "GRPOTrainer" in grpo_line
    assert "offloaded" in sft_line and "offloaded" in grpo_line


def test_the_trl_export_leaves_the_offload_to_unsloth() -> None:
    """The preset's activation_offload is Unsloth's offloaded checkpointing (get_peft_model's
    use_gradient_checkpointing="unsloth"), not TRL's activation_offloading, which would offload a second time."""
    from trainfit.export.trl import build
    from trainfit.spec.card import load_card_dict

    base = {"model": "Qwen/Qwen2.5-3B", "method": "sft", "scope": "lora", "hardware": {"gpu": "a10g", "gpus_per_node": 1}}
    uns = build(load_card_dict(apply_preset(dict(base), "unsloth")))
    assert "activation_offloading" not in uns.data["args"]
    assert any('use_gradient_checkpointing="unsloth"' in n for n in uns.notes)
    trl = build(load_card_dict(apply_preset({**base, "parallel": {"activation_offload": True}}, "trl")))
    assert trl.data["args"]["activation_offloading"] is True
