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
    r = _run(app, [str(grpo_card), "--to", target, "--out", str(out)])
    assert f"wrote {target} config to {out}" in r.stdout
    text = out.read_text()
    assert {"accelerate": "distributed_type: FSDP", "deepspeed": '"stage": 3', "trl": "GRPOConfig(",
            "verl": "actor_rollout_ref.rollout.n=8", "openrlhf": "--rollout.n_samples_per_prompt 8"}[target] in text


def test_set_and_stdout(app, grpo_card):
    r = _run(app, [str(grpo_card), "--to", "verl", "--set", "rollout.gpu_memory_utilization=0.55"])
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.55" in r.stdout


def test_unknown_target_is_one_line(app):
    from trainfit.errors import TrainfitError

    r = CliRunner().invoke(app, ["export", "--to", "megatron"])
    assert r.exit_code != 0 and isinstance(r.exception, TrainfitError)
    assert "allowed: accelerate, deepspeed, trl, verl, openrlhf" in str(r.exception)
