"""The HTML reports: self-contained files whose charts and tables carry the plan's own numbers."""

from __future__ import annotations

import re

import pytest

from trainfit.compute.cost import parse_price
from trainfit.plan import make_plan
from trainfit.report.html import chart_model, write_fit_html, write_plan_html
from trainfit.search import fit
from trainfit.spec.card import load_card_dict
from trainfit.units import GIB

CARDS = {
    "sft": {},
    "one-gpu": {"hardware": {"gpus_per_node": 1}},
    "paged": {"scope": "lora", "precision": {"optimizer": "paged_adamw_8bit"}, "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}},
    "grpo-split": {"method": "grpo", "scope": "lora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4},
                   "rollout": {"placement": "split", "gpus": 2}},
    "ppo": {"method": "ppo"},
}


def _self_contained(html: str) -> None:
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert "<script" not in html and "<link" not in html and "@import" not in html


@pytest.mark.parametrize("name", sorted(CARDS))
def test_plan_report(tmp_path, name):
    plan = make_plan(load_card_dict(CARDS[name]))
    path = write_plan_html(plan, tmp_path / "r.html")
    html = path.read_text()
    _self_contained(html)
    model = chart_model(plan)
    # the stacked segments add up to the device figure of every phase of every group
    for g in model["groups"]:
        for ph in g["phases"]:
            assert abs(sum(b for _, b in ph["segments"]) - ph["device"]) <= 4
    assert [g["name"] for g in model["groups"]] == [g.name for g in plan.groups]
    assert html.count('class="group"') == len(plan.groups)
    assert html.count('class="capacity"') == len(plan.groups)
    assert ("FITS" if plan.fits else "DOES NOT FIT") in html
    label = "headroom" if plan.headroom_bytes >= 0 else "over by"
    assert f"{label} {abs(plan.headroom_bytes) / GIB:.1f} GiB" in html
    for a in plan.assumptions[:3]:
        assert a.replace("'", "&#x27;").replace("<", "&lt;")[:40] in html
    assert ("KV cache capacity against demand" in html) == (plan.rollout is not None)
    if plan.rollout is not None:
        assert f"{plan.rollout.kv_capacity_tokens:,} tokens" in html and f"{plan.rollout.demand_tokens:,} tokens" in html


def test_names_are_escaped(tmp_path):
    from trainfit.catalog.models import hf_config_of

    card = {"model": {"config": hf_config_of("Qwen/Qwen3-0.6B"), "id": "<script>alert(1)</script>"}}
    html = write_plan_html(make_plan(load_card_dict(card)), tmp_path / "r.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;" in html


def test_fit_report(tmp_path):
    gpus = ["rtx4090", "a100-40gb", "h100-sxm"]
    result = fit({"model": "Qwen/Qwen3-8B", "method": "sft"}, gpus=gpus, max_gpus=8,
                 prices={g: parse_price(p) for g, p in zip(gpus, ("1.98CNY", "6CNY", "15CNY"))},
                 pinned=frozenset({"model", "method"}))
    html = write_fit_html(result, tmp_path / "f.html", title="fit: Qwen3-8B SFT").read_text()
    _self_contained(html)
    assert "<h1>fit: Qwen3-8B SFT</h1>" in html
    assert html.count("<tr class=") == len(result.rows)
    assert "cost per step (CNY)" in html
    pareto = [r for r in result.rows if r.pareto]
    assert pareto and html.count('class="point pareto"') == len(pareto)
