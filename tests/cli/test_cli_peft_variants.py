"""`trainfit plan | trace | export` on DoRA, (IA)^3 and prompt-tuning cards: planned, traced within 2%, and
refused in one line (exit 2) where nothing models them."""

import json

import pytest

from trainfit.cli.main import main

TINY = ("model={config: {model_type: llama, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,"
        " num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 512, tie_word_embeddings: false}}")
BASE = ["--set", TINY, "--gpus", "1", "--strategy", "single", "--seq", "64", "--no-ckpt"]
SCOPES = {
    "dora": ["--scope", "dora", "--set", "lora.targets=[q_proj, v_proj]"],
    "ia3": ["--scope", "ia3"],
    "prompt_tuning": ["--scope", "prompt_tuning", "--set", "prompt_tuning.num_virtual_tokens=16"],
}


def _lines(capsys) -> list[str]:
    out, err = capsys.readouterr()
    return [ln for ln in (out + err).splitlines() if ln.strip()]


@pytest.mark.parametrize("scope", SCOPES)
def test_plan_json_states_the_method(scope, capsys):
    assert main(["plan", *BASE, *SCOPES[scope], "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["card"]["scope"] == scope
    assert obj["step_seconds"] > 0 and obj["peak_phase"] in ("forward", "backward")
    assert any(("DoRA" if scope == "dora" else "IA)^3" if scope == "ia3" else "prompt tuning") in a
               for a in obj["assumptions"])


@pytest.mark.trace
@pytest.mark.parametrize("scope", SCOPES)
def test_trace_matches_plan(scope, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    assert main(["trace", *BASE, *SCOPES[scope], "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert abs(obj["peak_error"]) < 0.02 and obj["traced_peak_phase"] == obj["planned_peak_phase"]


def test_plan_without_virtual_tokens_is_one_line(capsys):
    assert main(["plan", *BASE, "--scope", "prompt_tuning"]) == 2
    assert _lines(capsys) == ["trainfit: error: prompt_tuning.num_virtual_tokens: required with scope prompt_tuning"
                              " (PEFT has no default); allowed: 1 to 1000000, e.g. 20"]


CARDS = {
    "dora": "scope: dora\nlora: {rank: 8, targets: [q_proj, v_proj]}\n",
    "ia3": "scope: ia3\n",
    "prompt_tuning": "scope: prompt_tuning\nprompt_tuning: {num_virtual_tokens: 16}\n",
}


@pytest.mark.parametrize("scope", SCOPES)
def test_export_refuses_in_one_line(scope, tmp_path, capsys):
    card = tmp_path / "card.yaml"
    card.write_text("model: meta-llama/Llama-3.2-3B\nhardware: {gpu: l40s, gpus_per_node: 1}\n"
                    "parallel: {strategy: single}\n" + CARDS[scope])
    assert main(["export", str(card), "--to", "trl", "--out", str(tmp_path / "x")]) == 2
    assert _lines(capsys) == [f"trainfit: error: scope: '{scope}' is not exported (the targets write LoRA adapter"
                              " configs); allowed for export: full, lora, qlora"]
    assert not (tmp_path / "x").exists()
