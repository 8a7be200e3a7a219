"""A plan that does not fit lists the changes that make it fit, each confirmed by re-planning."""

import json

import pytest

from trainfit.cli.main import main
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_failing_plan_suggests_confirmed_fixes(capsys):
    assert main(["plan", "--strategy", "single", "--gpus", "1", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["fits"] is False
    single = obj["suggestions"]["single"]
    assert single, "one 40 GB card cannot hold Qwen3-8B full SFT, but offload or LoRA can"
    for s in single:
        assert s["saving_bytes"] > 0 and s["peak_device_bytes"] <= obj["gpu_capacity_bytes"]
    # each suggestion really fits when applied
    card = {"hardware": {"gpu": "a100-40gb", "gpus_per_node": 1}, "parallel": {"strategy": "single"}}
    for s in single:
        data = json.loads(json.dumps(card))
        for key, value in s["changes"].items():
            node = data
            *parents, leaf = key.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        assert make_plan(load_card_dict(data)).fits
    deltas = [s["delta_seconds"] for s in single]
    assert deltas == sorted(deltas)


def test_fitting_plan_has_no_suggestions(capsys):
    assert main(["plan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["suggestions"] is None


def test_preset_knob_names_in_suggestions(capsys):
    assert main(["plan", "--method", "grpo", "--preset", "trl", "--gpus", "8", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    # TRL colocates vLLM at 0.3 of a 40 GB card: too small for 15 GiB of Qwen3-8B weights
    assert obj["fits"] is False and obj["rollout"]["engine_fits"] is False
    names = {n for s in obj["suggestions"]["single"] for n in s["knob_names"].values()}
    assert "vllm_tensor_parallel_size" in names and "vllm_gpu_memory_utilization" in names


GRPO_27B = ["plan", "--method", "grpo", "--model", "Qwen/Qwen3.5-27B", "--gpu", "rtx4090", "--gpus", "8", "--scope", "qlora",
            "--set", "rollout.tensor_parallel=8", "--set", "rollout.gpu_memory_utilization=0.5"]


def test_weight_sync_text_names_the_sync_the_plan_holds(capsys):
    # issue 14: the plan printed "per_parameter sync" while holding a 50.1 GiB full-gather buffer
    assert main([*GRPO_27B, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    sync = next(p for p in obj["phases"] if p["name"] == "weight_sync")
    full = sync["components"]["weight_sync_buffer"]
    assert full > 45 * 2**30  # the whole bf16 model gathered
    assert "full_gather sync" in sync["at"]
    assert any(a.startswith("weight sync: full_gather (rollout.weight_sync unset") for a in obj["assumptions"])
    assert main([*GRPO_27B, "--set", "rollout.weight_sync=per_parameter", "--json"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    sync = next(p for p in streamed["phases"] if p["name"] == "weight_sync")
    assert "per_parameter sync" in sync["at"] and sync["components"]["weight_sync_buffer"] < 3 * 2**30
    assert any(a == "weight sync: per_parameter (rollout.weight_sync as set)" for a in streamed["assumptions"])


def test_suggestions_include_the_weight_sync_and_sleep_level(capsys):
    assert main([*GRPO_27B, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["fits"] is False
    found = obj["suggestions"]["single"] + obj["suggestions"]["pairs"]
    assert any(s["changes"].get("rollout.weight_sync") in ("per_parameter", "bucketed") for s in found)
    # every suggestion is a plan of the changed card that fits
    from trainfit.cli.common import load_card

    for s in found:
        sets = [f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in s["changes"].items()]
        card = load_card(None, {"method": "grpo", "model": "Qwen/Qwen3.5-27B", "hardware.gpu": "rtx4090",
                                "hardware.gpus_per_node": 8, "scope": "qlora"},
                         ["rollout.tensor_parallel=8", "rollout.gpu_memory_utilization=0.5", *sets])
        plan = make_plan(card)
        assert plan.fits and plan.peak.device == pytest.approx(s["peak_device_bytes"], abs=1)


def test_candidates_are_fit_space_values():
    from trainfit.search import RL_SPACE
    from trainfit.suggest import candidate_changes

    card = load_card_dict({"method": "grpo", "scope": "lora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4}})
    cands = candidate_changes(card, card.model_dump(mode="json", exclude_unset=True))
    for key, values in RL_SPACE.items():
        assert {c[key] for c in cands if key in c} <= set(values)
    assert {"rollout.sleep_level": 1} in cands and {"rollout.weight_sync": "per_parameter"} in cands
    assert {"rollout.placement": "split", "rollout.gpus": 2} in cands
