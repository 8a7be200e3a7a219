"""``import --from deepspeed``: a batch key the file leaves open (absent, or the Hugging Face Trainer's "auto") is
left open in the card, so ``--base`` fills it ("the file's settings win": a file that says nothing wins nothing).
It was written as 1 over the base card's batch, and "auto" was refused although it is the value of HF's own
zero3.json. The Trainer fills "auto" from its arguments: ``HfTrainerDeepSpeedConfig.fill_match`` replaces a value
equal to "auto" (huggingface/transformers src/transformers/integrations/deepspeed.py l.119-121
@02348331baea70aaedce3b76c18481b2b441fe2d), for train_micro_batch_size_per_gpu from per_device_train_batch_size,
gradient_accumulation_steps from gradient_accumulation_steps, train_batch_size from their product x world size
(l.140-156), fp16.enabled / bf16.enabled from its fp16 / bf16 arguments (l.185-196)."""

from __future__ import annotations

import json

import pytest
import typer
import yaml
from typer.testing import CliRunner

from trainfit.cli.import_cmd import import_ as import_cmd
from trainfit.errors import InputError
from trainfit.export.importers import read_deepspeed

BASE = {"model": "Qwen/Qwen3-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "precision": {"compute": "fp16"}, "batch": {"micro_batch_size": 4, "grad_accum": 2, "seq_len": 4096}}

HF_ZERO3 = {  # the shape of HF's docs zero3.json: every Trainer-owned value "auto"
    "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16},
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                          "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto"},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False,
}


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("import")(import_cmd)
app.command("noop")(lambda: None)  # two commands keep "import" as a subcommand


def _import(tmp_path, ds: dict, *extra: str):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    r = CliRunner().invoke(app, ["import", str(path), "--from", "deepspeed", "--json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _with_base(tmp_path, ds: dict):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(BASE))
    return _import(tmp_path, ds, "--base", str(base))


@pytest.mark.parametrize("ds", [{"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}, HF_ZERO3])
def test_the_base_fills_the_batch_the_file_leaves_open(tmp_path, ds):
    out = _with_base(tmp_path, ds)
    assert out["card"]["batch"] == {"micro_batch_size": 4, "seq_len": 4096, "grad_accum": 2}
    said = " ".join(out["notes"])
    assert "batch.micro_batch_size 4 from the --base card" in said, said
    assert "batch.grad_accum 2 from the --base card" in said, said


def test_auto_precision_is_the_base_cards(tmp_path):
    out = _with_base(tmp_path, HF_ZERO3)
    assert out["card"]["precision"]["compute"] == "fp16"  # the base's; "auto" was read as bf16 before
    assert out["card"]["precision"]["master_weights"] == "fp32"  # DeepSpeed's ZeRO keeps fp32 masters
    assert "precision.compute fp16 from the --base card" in " ".join(out["notes"])


def test_without_a_base_the_card_default_is_taken_and_said(tmp_path):
    out = _import(tmp_path, HF_ZERO3)
    assert "batch" not in out["card"]
    said = " ".join(out["notes"])
    assert ("train_micro_batch_size_per_gpu 'auto' (the Hugging Face Trainer fills it from"
            " per_device_train_batch_size): left open by the file; batch.micro_batch_size 1 is the card default") in said
    assert "gradient_accumulation_steps 'auto'" in said and "batch.grad_accum 1 is the card default" in said
    assert "precision.compute bf16 is the card default" in said


def test_an_absent_key_is_said_as_absent_and_set_wins(tmp_path):
    out = _import(tmp_path, {"zero_optimization": {"stage": 1}}, "--set", "batch.grad_accum=8")
    assert out["card"]["batch"] == {"grad_accum": 8}
    said = " ".join(out["notes"])
    assert "train_micro_batch_size_per_gpu absent: left open by the file; batch.micro_batch_size 1 is the card default" in said
    assert "batch.grad_accum 8 from --set" in said


def test_stated_keys_still_win_over_the_base(tmp_path):
    out = _with_base(tmp_path, {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 16,
                                "zero_optimization": {"stage": 2}})
    assert out["card"]["batch"]["micro_batch_size"] == 2 and out["card"]["batch"]["grad_accum"] == 16
    assert not any("left open" in n for n in out["notes"])


def test_train_batch_size_with_open_factors_gives_no_world_size():
    imp = read_deepspeed(json.dumps({"train_batch_size": 64, "gradient_accumulation_steps": "auto"}))
    assert "hardware" not in imp.card
    assert any("train_batch_size 64: the GPU count is left open" in n for n in imp.notes)


@pytest.mark.parametrize("value", ["AUTO", "four", None])
def test_other_text_is_still_refused(value):
    with pytest.raises(InputError, match="train_micro_batch_size_per_gpu: expected a number"):
        read_deepspeed(json.dumps({"train_micro_batch_size_per_gpu": value}))
