"""`trainfit export` through a local typer app (the command is registered in cli/main.py separately)."""

from __future__ import annotations

import json

import pytest
import typer
import yaml
from export_cards import GRPO_LORA
from typer.testing import CliRunner

from trainfit.cli.export_cmd import export as export_cmd
from trainfit.export import TARGETS


@pytest.fixture(scope="module")
def app():
    a = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    a.command("export")(export_cmd)
    a.command("noop")(lambda: None)  # two commands keep "export" as a subcommand
    return a


@pytest.fixture(scope="module")
def grpo_card(tmp_path_factory):
    p = tmp_path_factory.mktemp("cards") / "grpo_lora.yaml"
    p.write_text(yaml.safe_dump(GRPO_LORA))
    return p


def _run(app, args):
    r = CliRunner().invoke(app, ["export", *args])
    assert r.exit_code == 0, (r.output, r.exception)
    return r


@pytest.mark.parametrize("target", TARGETS)
def test_default_card_every_target(app, target):
    r = _run(app, ["--to", target, "--json"])
    d = json.loads(r.stdout)
    assert d["target"] == target and isinstance(d["notes"], list)
    assert d["text"] or target == "verl"


@pytest.mark.parametrize("target", TARGETS)
def test_grpo_lora_every_target(app, grpo_card, tmp_path, target):
    out = tmp_path / f"out.{target}"
    if target == "torchtitan":  # full-weight SFT only: refused in one line, nothing written
        from trainfit.cli.main import main

        assert main(["export", str(grpo_card), "--to", target, "--out", str(out)]) == 2
        assert not out.exists()
        return
    r = _run(app, [str(grpo_card), "--to", target, "--out", str(out)])
    assert f"wrote {target} config to {out}" in r.stdout
    text = out.read_text()
    assert {"accelerate": "distributed_type: FSDP", "deepspeed": '"stage": 3', "trl": "GRPOConfig(",
            "verl": "actor_rollout_ref.rollout.n=8", "openrlhf": "--rollout.n_samples_per_prompt 8",
            "nemo-rl": "num_generations_per_prompt: 8"}[target] in text


def test_set_and_stdout(app, grpo_card):
    r = _run(app, [str(grpo_card), "--to", "verl", "--set", "rollout.gpu_memory_utilization=0.55"])
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.55" in r.stdout


def test_unknown_target_is_one_line(app):
    from trainfit.errors import TrainfitError

    r = CliRunner().invoke(app, ["export", "--to", "megatron"])
    assert r.exit_code != 0 and isinstance(r.exception, TrainfitError)
    assert "allowed: accelerate, deepspeed, trl, verl, openrlhf, torchtitan, nemo-rl" in str(r.exception)


def test_out_over_the_input_card_is_refused_and_the_card_kept(grpo_card):
    from trainfit.cli.main import main

    before = grpo_card.read_text()
    assert main(["export", str(grpo_card), "--to", "verl", "--out", str(grpo_card)]) == 2
    assert grpo_card.read_text() == before


def test_failed_export_writes_nothing(tmp_path):
    from trainfit.cli.main import main

    card = tmp_path / "q.yaml"
    card.write_text(yaml.safe_dump({"method": "sft", "scope": "qlora"}))
    out = tmp_path / "run_verl.sh"
    assert main(["export", str(card), "--to", "verl", "--out", str(out)]) == 2
    assert not out.exists()


def test_notes_and_lost_keys_come_before_the_file_is_written(grpo_card, tmp_path, capsys):
    from trainfit.cli.main import main

    out = tmp_path / "train_config.py"
    assert main(["export", str(grpo_card), "--to", "trl", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    wrote = next(i for i, line in enumerate(lines) if line.startswith("wrote trl config"))
    lost = next(i for i, line in enumerate(lines) if line.startswith("not carried by the trl file"))
    assert lost < wrote and "rollout.weight_sync" in lines[lost]


def test_import_reads_the_export_back(grpo_card, tmp_path, capsys):
    from trainfit.cli.main import main

    script = tmp_path / "run_verl.sh"
    assert main(["export", str(grpo_card), "--to", "verl", "--out", str(script)]) == 0
    capsys.readouterr()
    card_out = tmp_path / "back.yaml"
    assert main(["import", str(script), "--from", "verl", "--out", str(card_out)]) == 0
    back = yaml.safe_load(card_out.read_text())
    assert back["model"] == "Qwen/Qwen3-8B" and back["method"] == "grpo" and back["scope"] == "lora"
    assert back["rollout"]["num_generations"] == 8 and back["rollout"]["weight_sync"] == "bucketed"
    capsys.readouterr()
    assert main(["import", str(script), "--from", "verl", "--json", "--set", "hardware.gpu=h100-sxm"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["card"]["hardware"]["gpu"] == "h100-sxm" and obj["target"] == "verl"
    # the imported card plans as verl's (its FSDP optimizer-only offload is verl's actor optimizer_offload; without
    # the preset the plan refuses it: plan.time.fsdp_optimizer_offload_refusal)
    assert main(["plan", str(card_out), "--set", "preset=verl", "--json"]) == 0


def test_import_trl_with_its_accelerate_file(grpo_card, tmp_path, capsys):
    from trainfit.cli.main import main

    py, acc = tmp_path / "train_config.py", tmp_path / "accelerate.yaml"
    assert main(["export", str(grpo_card), "--to", "trl", "--out", str(py)]) == 0
    assert main(["export", str(grpo_card), "--to", "accelerate", "--out", str(acc)]) == 0
    capsys.readouterr()
    assert main(["import", str(py), "--from", "trl", "--with", str(acc), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)["card"]
    assert card["parallel"]["strategy"] == "fsdp" and card["lora"]["rank"] == 32


def test_import_errors_are_one_line(tmp_path, capsys):
    from trainfit.cli.main import main

    bad = tmp_path / "x.py"
    bad.write_text("import os\nos.system('touch MARK')\n")
    assert main(["import", str(bad), "--from", "trl"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--from trl" in err and not (tmp_path / "MARK").exists()
    assert main(["import", str(bad), "--from", "megatron"]) == 2
    assert "allowed: accelerate, deepspeed, trl, verl, openrlhf" in capsys.readouterr().err
    out = tmp_path / "o.yaml"
    assert main(["import", str(bad), "--from", "trl", "--out", str(bad)]) == 2
    assert not out.exists()


def test_import_base_fills_what_the_file_does_not_carry(grpo_card, tmp_path, capsys):
    from trainfit.cli.main import main

    ds = tmp_path / "ds_config.json"
    assert main(["export", str(grpo_card), "--to", "deepspeed", "--out", str(ds)]) == 0
    assert "--base CARD" in capsys.readouterr().out
    assert main(["import", str(ds), "--from", "deepspeed", "--base", str(grpo_card), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)["card"]
    # the file's settings win (DeepSpeed ZeRO-3 keeps fp32 master weights); the card fills the rest
    assert card["method"] == "grpo" and card["lora"]["rank"] == 32 and card["parallel"]["strategy"] == "zero3"
    assert card["precision"]["master_weights"] == "fp32"
