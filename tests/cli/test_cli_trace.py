"""`trainfit trace`: JSON output beside the plan, and one-line refusals for what cannot be traced."""

import json

import pytest

from trainfit.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("peft")

TINY = ("model={config: {model_type: qwen3, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,"
        " num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 512, tie_word_embeddings: false}}")


@pytest.mark.trace
def test_trace_json_matches_plan(capsys):
    rc = main(["trace", "--set", TINY, "--gpus", "1", "--strategy", "single", "--seq", "64", "--no-ckpt", "--json"])
    assert rc == 0
    obj = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in obj["phases"]] == ["forward", "backward", "optimizer_step"]
    assert obj["traced_peak_phase"] == obj["planned_peak_phase"]
    assert abs(obj["peak_error"]) < 0.02
    assert obj["params_total"] > 0 and obj["traced_peak_bytes"] > 0


@pytest.mark.trace
def test_trace_text_output(capsys):
    assert main(["trace", "--set", TINY, "--gpus", "1", "--strategy", "single", "--seq", "64"]) == 0
    out = capsys.readouterr().out
    assert "traced on fake CPU tensors" in out and "optimizer_step" in out and "peak: traced" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--attention", "flash"], "attention: 'flash' needs the flash-attn CUDA kernel"),
        (["--strategy", "ddp"], "parallel.strategy: trace supports single and fsdp"),
        (["--set", "model={params: 27e9}"], "model: a bare parameter count has no architecture"),
        (["--set", "precision.optimizer=adamw_8bit"], "precision.optimizer: trace runs torch AdamW only"),
        (["--set", "method=ppo"], "method: trace runs the SFT step only"),
    ],
)
def test_trace_refuses_in_one_line(argv, expected, capsys):
    rc = main(["trace", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and expected in err


def test_qlora_trace_without_bitsandbytes_says_why(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else real(name, *a))
    rc = main(["trace", "--set", TINY, "--scope", "qlora", "--gpus", "1", "--strategy", "single", "--seq", "32"])
    err = capsys.readouterr().err
    assert rc == 2 and "bitsandbytes is not installed" in err and err.count("\n") == 1


@pytest.mark.trace
def test_qlora_trace_json_matches_plan(capsys):
    pytest.importorskip("bitsandbytes")
    rc = main(["trace", "--set", TINY, "--scope", "qlora", "--gpus", "1", "--strategy", "single", "--seq", "64",
               "--no-ckpt", "--json"])
    assert rc == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["traced_peak_phase"] == obj["planned_peak_phase"] and abs(obj["peak_error"]) < 0.02


def test_qlora_trace_refuses_another_dequant_kernel(capsys):
    rc = main(["trace", "--set", TINY, "--scope", "qlora", "--set", "lora.dequant=torchao", "--gpus", "1",
               "--strategy", "single", "--seq", "32"])
    err = capsys.readouterr().err
    assert rc == 2 and "lora.dequant" in err and err.count("\n") == 1
