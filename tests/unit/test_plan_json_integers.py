"""docs/plan-json.md: "All byte figures are integers in bytes". A review found
``time.phases[optimizer_step].terms.bytes_moved`` printed as a float (20476838400.0); the JSON rendering now writes
every byte figure as an int. Also: every top-level key and every ``time.phases[].name`` the JSON prints is named in
the doc (a review found checkpoint, cost, groups, roles, rollout, train_world_size, slowest_rank and fsdp_copies
missing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainfit.plan import make_plan
from trainfit.report.json_report import is_byte_key, plan_to_dict, suggestions_to_dict
from trainfit.spec.card import load_card_dict

DOC = Path(__file__).resolve().parents[2] / "docs" / "plan-json.md"

CARDS = {
    "default sft, fsdp": {},
    "zero2 + optimizer offload": {"parallel": {"strategy": "zero2", "offload": "optimizer"}},
    "tp8 x pp2 over two nodes": {"model": "meta-llama/Llama-3.1-70B", "hardware": {"gpu": "h100-sxm", "nodes": 2},
                                 "parallel": {"tensor_parallel": 8, "pipeline_parallel": 2}},
    "grpo lora, priced": {"method": "grpo", "scope": "lora", "hardware": {"gpu": "h100-sxm", "price_per_gpu_hour": 2.5,
                                                                          "currency": "USD"}},
    "qlora that does not fit": {"model": "Qwen/Qwen3.5-27B", "scope": "qlora", "batch": {"seq_len": 4096},
                                "hardware": {"gpu": "rtx4090", "gpus_per_node": 4}},
}


def _byte_figures(obj, path="$"):
    """(path, value) of every key naming a byte figure, anywhere in the object."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and is_byte_key(k) and not isinstance(v, (dict, list)) and v is not None:
                yield f"{path}.{k}", v
            yield from _byte_figures(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _byte_figures(v, f"{path}[{i}]")


def _plan_json(overrides: dict) -> dict:
    from trainfit.suggest import suggestions

    card = load_card_dict(overrides)
    plan = make_plan(card)
    obj = plan_to_dict(plan)
    obj["suggestions"] = suggestions_to_dict(suggestions(card, plan))
    return obj


@pytest.mark.parametrize("name", CARDS)
def test_every_byte_figure_is_an_int(name):
    obj = _plan_json(CARDS[name])
    figures = dict(_byte_figures(obj))
    assert figures, "no byte figures found: the walk is broken"
    floats = {p: v for p, v in figures.items() if type(v) is not int}
    assert not floats, floats


def test_the_optimizer_steps_bytes_moved_is_an_int():
    obj = _plan_json({})
    opt = next(t for t in obj["time"]["phases"] if t["name"] == "optimizer_step")
    assert type(opt["terms"]["bytes_moved"]) is int and opt["terms"]["bytes_moved"] > 0
    assert all(type(v) is float or v is None for k, v in opt["terms"].items() if k.endswith("_s"))


def test_byte_keys():
    assert is_byte_key("bytes_moved") and is_byte_key("peak_device_bytes") and is_byte_key("bytes")
    assert not is_byte_key("nic_bytes_per_s") and not is_byte_key("kernels")


def _documented_keys() -> set[str]:
    keys = set()
    for line in DOC.read_text().splitlines():
        if line.startswith("| `"):
            keys.update(re.findall(r"`([a-z_]+)[`.[]", line.split("|")[1]))
    return keys


@pytest.mark.parametrize("name", CARDS)
def test_every_top_level_key_is_documented(name):
    obj = _plan_json(CARDS[name])
    missing = sorted(set(obj) - _documented_keys())
    assert not missing, missing


def test_every_time_phase_name_is_documented():
    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `time.phases` |"))
    names = set()
    for name in CARDS:
        obj = _plan_json(CARDS[name])
        names |= {t["name"] for t in (obj["time"] or {"phases": []})["phases"]}
    assert {"slowest_rank", "fsdp_copies"} <= names
    missing = sorted(n for n in names if f"`{n}`" not in row)
    assert not missing, missing
