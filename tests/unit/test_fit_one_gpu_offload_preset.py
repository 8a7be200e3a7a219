"""On one GPU ``fit`` offloads the way the card's framework does (``methods.presets.one_gpu_offload_strategy``), not
always under DeepSpeed ZeRO: verl, NeMo RL and SkyRL train with torch FSDP and have no DeepSpeed backend (trainfit's
own verl export: "verl's trainer shards with FSDP"); verl's actor offloads the optimizer alone or with the parameters
(``fsdp_config.optimizer_offload`` / ``param_offload``: volcengine/verl verl/workers/fsdp_workers.py l.893-898,
l.928-932 @b178a3cd56f58b2d502255daba591e92833930a7), NeMo RL and SkyRL only both (FSDP2 ``CPUOffloadPolicy``);
Unsloth offloads activations only, so no offload row; TRL, OpenRLHF, LLaMA-Factory, ms-swift and no preset keep
DeepSpeed's ZeRO-Offload (zero2 optimizer, zero3 parameters)."""

import pytest

from trainfit import fit_search
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict

SFT = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}}
RL = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}}
BATCHES = [{"micro_batch_size": 1, "grad_accum": 1}]


def _pairs(combos, base):
    par = base.get("parallel") or {}
    return {(c.get("parallel.strategy", par.get("strategy", "fsdp")), c.get("parallel.offload", par.get("offload", "none")))
            for c in combos}


def _sft(preset):
    base = SFT | ({"preset": preset} if preset else {})
    return _pairs(fit_search.sft_combos(1, pinned=frozenset({"model", "method"}), batches=BATCHES, base=base), base)


def _rl(preset):
    base = RL | ({"preset": preset} if preset else {})
    return _pairs(fit_search.rl_combos(1, pinned=frozenset({"model", "method"}), base=base), base)


@pytest.mark.parametrize("preset", [None, "trl", "openrlhf", "llamafactory-z2", "ms-swift-zero3"])
def test_deepspeed_frameworks_offload_one_gpu_under_zero(preset):
    assert _sft(preset) == {("single", "none"), ("zero2", "optimizer"), ("zero3", "params_and_optimizer")}


def test_verl_offloads_one_gpu_under_fsdp():
    assert _sft("verl") == {("single", "none"), ("fsdp", "optimizer"), ("fsdp", "params_and_optimizer")}
    assert _rl("verl") == {("single", "none"), ("fsdp", "params_and_optimizer")}


@pytest.mark.parametrize("preset", ["nemo-rl", "skyrl"])
def test_fsdp2_frameworks_offload_parameters_and_optimizer_together(preset):
    assert _sft(preset) == {("single", "none"), ("fsdp", "params_and_optimizer")}
    assert _rl(preset) == {("single", "none"), ("fsdp", "params_and_optimizer")}


def test_unsloth_gets_no_offload_row():
    assert _rl("unsloth") == {("single", "none")}
    assert _sft("unsloth") == {("single", "none")}


@pytest.mark.parametrize("strategy", ["zero1", "zero2", "zero3"])
def test_the_card_refuses_unsloth_under_a_zero_strategy(strategy):
    card = RL | {"preset": "unsloth", "parallel": {"strategy": strategy}}
    with pytest.raises((CardError, ValueError)) as exc:
        load_card_dict(card)
    line = str(exc.value)
    assert "\n" not in line
    assert f"parallel.strategy: '{strategy}' with preset unsloth" in line and "allowed: single, ddp, fsdp" in line


def test_plan_with_preset_unsloth_and_no_card_still_plans():
    # the embedded default card states strategy fsdp; the preset's single does not override it
    from trainfit.api import load_card

    card = load_card(None, {"method": "grpo", "preset": "unsloth", "hardware.gpus_per_node": 1, "scope": "lora"})
    assert card.parallel.strategy.value == "fsdp"


def test_the_single_offload_refusal_names_the_fsdp_presets_one_gpu_path():
    card = RL | {"preset": "verl", "parallel": {"strategy": "single", "offload": "params_and_optimizer"}}
    with pytest.raises((CardError, ValueError)) as exc:
        load_card_dict(card)
    assert "(one GPU: zero2 or zero3, DeepSpeed ZeRO-Offload; fsdp under presets verl, nemo-rl, skyrl)" in str(exc.value)


def test_fit_searches_an_unsloth_card_that_leaves_the_strategy_open(tmp_path, capsys):
    # fit reads the card file before the preset fills single; every one-GPU row is single (no offload)
    import json

    import yaml

    from trainfit.cli.main import main

    card = RL | {"preset": "unsloth", "hardware": {"gpu": "l4", "gpus_per_node": 1, "nodes": 1},
                 "rollout": {"response_len": 128, "prompt_len": 64, "num_generations": 4, "prompts_per_step": 1}}
    path = tmp_path / "unsloth.yaml"
    path.write_text(yaml.safe_dump(card), encoding="utf-8")
    assert main(["fit", str(path), "--gpu", "l4", "--max-gpus", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and {(r["knobs"].get("parallel.strategy"), r["knobs"].get("parallel.offload")) for r in rows} == {
        ("single", "none")}
