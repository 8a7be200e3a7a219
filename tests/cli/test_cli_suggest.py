"""A plan that does not fit lists the changes that make it fit, each confirmed by re-planning."""

import json

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
