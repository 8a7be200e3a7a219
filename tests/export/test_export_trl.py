"""TRL export: the config class is constructed for real (TRL 1.16, transformers 5.24), and LoraConfig (peft)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from export_cards import CARDS

from trainfit.export import export, to_trl

trl = pytest.importorskip("trl")


@pytest.mark.parametrize("name", sorted(CARDS))
def test_trl_config_constructs(name, tmp_path):
    import transformers

    card = CARDS[name]()
    data = to_trl(card)
    cls_name = data["config_class"]
    cls = getattr(transformers, cls_name) if cls_name == "TrainingArguments" else getattr(trl, cls_name)
    args = dict(data["args"], output_dir=str(tmp_path), use_cpu=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = cls(**args)
    assert cfg.per_device_train_batch_size == card.batch.micro_batch_size
    if card.method.value == "grpo" and "generation_batch_size" in data["args"]:
        # an optimizer step is the generation batch's micro-batches / rollout.mini_batches (TRL steps the optimizer
        # every gradient_accumulation_steps micro-batches; grpo_config.py l.1077-1091 @f2cd5771), not batch.grad_accum
        from trainfit.export.common import train_world

        micro_steps = cfg.generation_batch_size // (card.batch.micro_batch_size * train_world(card))
        assert cfg.gradient_accumulation_steps * card.rollout.mini_batches == micro_steps
    elif card.method.value != "grpo":
        assert cfg.gradient_accumulation_steps == card.batch.grad_accum
    assert cfg.bf16 is True
    assert str(cfg.optim.value if hasattr(cfg.optim, "value") else cfg.optim) == data["args"]["optim"]
    if card.method.value in ("sft", "rm", "dpo"):
        assert cfg.max_length == card.batch.seq_len
    if card.method.value == "grpo":
        ro = card.rollout
        assert cfg.num_generations == ro.num_generations
        assert cfg.max_completion_length == ro.response_len
        assert cfg.generation_batch_size >= ro.prompts_per_step * ro.num_generations
        assert cfg.generation_batch_size % ro.num_generations == 0
        assert cfg.use_vllm is (ro.engine.value == "vllm")
        if cfg.use_vllm:
            assert cfg.vllm_mode == ("colocate" if ro.placement.value == "colocate" else "server")
            if cfg.vllm_mode == "colocate":
                assert cfg.vllm_gpu_memory_utilization == ro.gpu_memory_utilization
                assert cfg.vllm_tensor_parallel_size == ro.tensor_parallel
        assert cfg.beta == (card.roles.kl_coef or 0.0)
    if data["peft"]:
        from peft import LoraConfig

        lc = LoraConfig(**data["peft"])
        assert lc.r == card.lora.rank and lc.lora_alpha == card.lora.alpha
    if data["quantization"]:
        from transformers import BitsAndBytesConfig

        q = BitsAndBytesConfig(**data["quantization"])
        assert q.load_in_4bit and q.bnb_4bit_quant_type == "nf4"
    assert data["launch"].startswith(("accelerate launch", "CUDA_VISIBLE_DEVICES="))
    assert "--config_file accelerate.yaml" in data["launch"]


def test_trl_vllm_serve_flags_exist():
    from trl.scripts.vllm_serve import ScriptArguments

    fields = {f.name for f in dataclasses.fields(ScriptArguments)}
    data = to_trl(CARDS["grpo-split-zero3"]())
    flags = [t[2:] for t in data["vllm_serve"].split() if t.startswith("--")]
    assert flags and set(flags) <= fields


def test_trl_ppo_is_said_unsupported():
    e = export(CARDS["ppo-full-zero3-2nodes"](), "trl")
    assert e.data["config_class"] == "TrainingArguments"
    assert any("no PPOTrainer" in n for n in e.notes)


def test_trl_grpo_lora_matches_the_card():
    d = to_trl(CARDS["grpo-lora"]())
    a = d["args"]
    assert a["beta"] == 0.04 and a["vllm_mode"] == "colocate" and a["vllm_gpu_memory_utilization"] == 0.4
    assert a["vllm_tensor_parallel_size"] == 2 and a["num_generations"] == 8
    assert d["peft"]["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    # FSDP does the checkpointing (accelerate.yaml), so the trainer does not do it twice
    assert a["gradient_checkpointing"] is False


def test_trl_text_is_python():
    for name in ("grpo-lora", "sft-ddp-qlora", "dpo-full-precomputed"):
        compile(export(CARDS[name](), "trl").text, name, "exec")


def _calls_card(calls: int, prompts: int = 24):
    from trainfit.spec.card import load_card_dict

    return load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "preset": "trl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4, "nodes": 1},
        "batch": {"micro_batch_size": 8},
        "rollout": {"placement": "split", "gpus": 1, "prompts_per_step": prompts, "num_generations": 8,
                    "generation_calls": calls}})


def test_generation_calls_span_one_optimizer_step(tmp_path):
    """rollout.generation_calls: TRL (>= 0.18) generates once every steps_per_generation micro-batches and steps the
    optimizer every gradient_accumulation_steps, so a step of eight calls is gradient_accumulation_steps = the step's
    micro-batches and steps_per_generation = an eighth of them (generation_batch_size, exclusive with it, unset)."""
    one, eight = to_trl(_calls_card(1)), to_trl(_calls_card(8))
    assert one["args"]["generation_batch_size"] == 24 * 8 and "steps_per_generation" not in one["args"]
    # 192 completions = 8 micro-batches of 8 x 3 training GPUs: one call each
    assert "generation_batch_size" not in eight["args"]
    assert eight["args"]["gradient_accumulation_steps"] == 8 and eight["args"]["steps_per_generation"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = trl.GRPOConfig(**dict(eight["args"], output_dir=str(tmp_path), use_cpu=True))
    # TRL's own arithmetic on one process: a generation of one micro-batch, eight of them per optimizer step
    assert cfg.steps_per_generation == 1 and cfg.generation_batch_size == 8
    assert cfg.gradient_accumulation_steps // cfg.steps_per_generation == 8
    # 24 prompts in 3 calls: 8 micro-batches do not split into 3 calls of whole micro-batches: one call, said so
    three = export(_calls_card(3), "trl")
    assert to_trl(_calls_card(3))["args"]["generation_batch_size"] == 24 * 8
    assert any("rollout.generation_calls 3" in n and "kept at one call" in n for n in three.notes)


@pytest.mark.parametrize("calls", [2, 4, 8])
def test_generation_calls_read_back(calls):
    from trainfit.export import read_back

    card = _calls_card(calls)
    back = read_back(card, export(card, "trl"))
    assert back.rollout.generation_calls == calls
    assert back.rollout.prompts_per_step == card.rollout.prompts_per_step
    assert back.rollout.num_generations == card.rollout.num_generations
