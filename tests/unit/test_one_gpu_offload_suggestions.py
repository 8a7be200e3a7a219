"""A one-GPU card that does not fit is offered offload with the strategy its framework offloads under on one GPU
(``methods.presets.one_gpu_offload_strategy``), in ``plan``'s suggestions (``suggest.candidate_changes``) and in
``diagnose``'s variants alike, as ``fit`` searches it: ``--strategy single`` cannot offload (the card refuses it), so
the bare ``parallel.offload`` change never re-planned and only a scope change was suggested."""

import json

from trainfit.cli.main import main
from trainfit.preflight.diagnose import _variants
from trainfit.spec.card import load_card_dict
from trainfit.suggest import candidate_changes

ONE = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "hardware": {"gpu": "l4", "gpus_per_node": 1},
       "parallel": {"strategy": "single"}}
RL = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora", "hardware": {"gpu": "l4", "gpus_per_node": 1},
      "parallel": {"strategy": "single"}}


def _offloads(changes):
    return [c for c in changes if "parallel.offload" in c and c["parallel.offload"] != "none"]


def test_suggest_pairs_offload_with_zero_stage_on_one_gpu():
    card = load_card_dict(ONE)
    got = _offloads(candidate_changes(card, ONE))
    assert {"parallel.offload": "optimizer", "parallel.strategy": "zero2"} in got
    assert {"parallel.offload": "params_and_optimizer", "parallel.strategy": "zero3"} in got
    assert all("parallel.strategy" in c for c in got)


def test_suggest_offload_under_fsdp_for_verl_and_none_for_unsloth():
    verl = RL | {"preset": "verl"}
    got = _offloads(candidate_changes(load_card_dict(verl), verl))
    assert got == [{"parallel.offload": "params_and_optimizer", "parallel.strategy": "fsdp"}]
    unsloth = RL | {"preset": "unsloth"}
    assert _offloads(candidate_changes(load_card_dict(unsloth), unsloth)) == []


def test_diagnose_variants_pair_offload_with_the_strategy():
    patches = [p for _, p in _variants(load_card_dict(ONE))]
    assert {"parallel.offload": "optimizer", "parallel.strategy": "zero2"} in patches
    assert not [p for p in patches if p.get("parallel.offload") not in (None, "none") and "parallel.strategy" not in p]
    unsloth = load_card_dict(RL | {"preset": "unsloth"})
    assert not [p for _, p in _variants(unsloth) if "parallel.offload" in p]


def test_plan_reproducer_suggests_zero2_optimizer_offload(capsys):
    # Qwen3-4B full SFT on one L4 does not fit under single; zero2 + optimizer offload does (the reviewer's card)
    assert main(["plan", "--model", "Qwen/Qwen3-4B", "--gpu", "l4", "--gpus", "1", "--strategy", "single",
                 "--seq", "1024", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["fits"] is False
    changes = [s["changes"] for s in obj["suggestions"]["single"]]
    assert {"parallel.offload": "optimizer", "parallel.strategy": "zero2"} in changes


def test_text_labels_the_offload_with_its_strategy_a_single_change(capsys):
    assert main(["plan", "--model", "Qwen/Qwen3-4B", "--gpu", "l4", "--gpus", "1", "--strategy", "single",
                 "--seq", "1024"]) == 0
    out = capsys.readouterr().out
    assert "  single: parallel.offload=optimizer, parallel.strategy=zero2: " in out


def test_no_offload_suggestion_for_unsloth_on_the_default_cards_fsdp():
    # `trainfit plan --preset unsloth` without a card keeps the embedded default's strategy fsdp: still no offload
    from trainfit.api import load_card

    card = load_card(None, {"method": "grpo", "preset": "unsloth", "hardware.gpus_per_node": 1, "scope": "lora",
                            "hardware.gpu": "l4"})
    base = card.model_dump(mode="json", exclude_unset=True)
    assert card.parallel.strategy.value == "fsdp"
    assert _offloads(candidate_changes(card, base)) == []
    assert not [p for _, p in _variants(card) if "parallel.offload" in p]
