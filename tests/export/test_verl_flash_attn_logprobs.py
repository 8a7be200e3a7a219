"""verl's FSDP actor computes its PPO/GRPO log-probs with flash-attn's cross_entropy_loss whenever flash-attn imports
(volcengine/verl verl/utils/torch_functional.py l.30-36, l.53-72 @e0d035cd4a6a5c29835516a58d78710a28e73b18): the
verl export says so (no key) and the import reads it as loss.kernel flash_attn, inplace_backward true; and a token
budget's critic: critic.model.use_remove_padding written, critic.ppo_max_token_len_per_gpu read as a note."""

from __future__ import annotations

import re

import pytest
from test_roundtrip import check_roundtrip

from trainfit.export import export, read_back
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
        "rollout": {"prompt_len": 512, "response_len": 1536, "prompts_per_step": 64, "num_generations": 8,
                    "response_len_mean": 700}}
FLASH = {"kernel": "flash_attn", "inplace_backward": True}


def _card(**extra):
    return load_card_dict({**BASE, **extra})


@pytest.mark.parametrize("method", ["ppo", "grpo"])
def test_flash_attn_card_round_trips_through_verl_without_loss(method):
    card = _card(method=method, loss=FLASH)
    e = export(card, "verl")
    said = " ".join(e.notes)
    assert "has no switch to flash-attn" not in said
    assert "verl's FSDP actor computes its log-probs with flash-attn's cross_entropy_loss" in said
    assert not [k for k in e.lost if k.startswith("loss.")], e.lost
    back = read_back(card, e)
    assert back.loss.kernel.value == "flash_attn" and back.loss.inplace_backward
    check_roundtrip(card, "verl")


def test_eager_card_to_verl_says_verl_runs_flash_attn():
    card = _card()
    e = export(card, "verl")
    assert {"loss.kernel", "loss.inplace_backward"} <= set(e.lost)
    assert any("the card's eager loss" in n and "loss.inplace_backward" in n for n in e.notes)
    check_roundtrip(card, "verl")


def test_temperature_copy_stays_a_note():
    card = _card(loss={**FLASH, "temperature_copy": True})
    e = export(card, "verl")
    assert [k for k in e.lost if k.startswith("loss.")] == ["loss.temperature_copy"]
    assert any(n.startswith("loss.temperature_copy true") for n in e.notes)


def test_chunked_sft_and_megatron_keep_their_own_loss():
    assert read_back(_card(loss={"chunked": True}), export(_card(loss={"chunked": True}), "verl")).loss.chunked
    sft = load_card_dict({"model": "Qwen/Qwen2.5-0.5B", "method": "sft", "loss": FLASH,
                          "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8}})
    assert any("has no switch to flash-attn" in n for n in export(sft, "verl").notes)
    mega = _card(parallel={"pipeline_parallel": 2}, loss=FLASH)
    e = export(mega, "verl")
    assert any("has no switch to flash-attn" in n for n in e.notes)
    assert read_back(mega, e).loss.kernel.value != "flash_attn"


def test_entropy_coeff_reads_inplace_backward_false():
    text = export(_card(), "verl").text.replace("python3 -m verl.trainer.main_ppo",
                                                "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.entropy_coeff=0.01")
    card = load_card_dict(import_text(text, "verl").card)
    assert card.loss.kernel.value == "flash_attn" and not card.loss.inplace_backward


def test_budget_critic_packs_and_its_budget_is_read_as_a_note():
    card = _card(method="ppo", rollout={**BASE["rollout"], "max_tokens_per_micro_batch": 8192})
    text = export(card, "verl").text
    assert "critic.model.use_remove_padding=True" in text and "critic.ppo_max_token_len_per_gpu=8192" in text
    assert not any("critic.ppo_max_token_len_per_gpu" in n for n in import_text(text, "verl").notes)
    # without the critic's key verl takes its default 32768 (ppo_trainer.yaml l.160 @e0d035cd): said, not a field
    bare = re.sub(r"\S*critic\.(ppo_max_token_len_per_gpu|model\.use_remove_padding)=\S+", "", text)
    notes = " ".join(import_text(bare, "verl").notes)
    assert "critic.ppo_max_token_len_per_gpu 32768" in notes and "critic.model.use_remove_padding false" in notes
    check_roundtrip(card, "verl")
