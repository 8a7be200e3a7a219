"""A price is for a rentable unit of GPUs: a provider that rents whole 8-GPU instances only bills every GPU of each
instance a run occupies, the idle ones included (AWS prices p5.48xlarge, 8x H100 SXM, at 55.04 USD/h in us-east-1:
the catalog's ``aws-p5-h100-sxm`` label). A review found those prices charged per card to rows of fewer cards, so
``fit`` ranked 1 x h100-sxm cheapest at 6.88 USD/h where AWS bills 55.04 USD/h."""

import json
import re
from importlib import resources

import pytest

from trainfit.catalog.prices import catalog_price_table, load_price_table, price_table_of
from trainfit.compute.cost import Price, billed_gpus, billing_note, cheapest_billed, cost_per_hour, run_cost
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("gpus", "unit", "billed"), [
    (1, 1, 1), (3, 1, 3), (1, 8, 8), (2, 8, 8), (7, 8, 8), (8, 8, 8), (9, 8, 16), (16, 8, 16), (17, 8, 24), (5, 4, 8),
])
def test_billed_gpus_is_whole_units(gpus, unit, billed):
    assert billed_gpus(gpus=gpus, gpus_per_instance=unit) == billed


def test_cost_bills_the_whole_instance():
    p5 = Price(per_gpu_hour=6.88, currency="USD", gpus_per_instance=8, instance="p5.48xlarge")
    assert cost_per_hour(p5, gpus=1).amount == pytest.approx(55.04)  # the label: 55.04 USD/h / 8 = 6.88 per GPU
    assert cost_per_hour(p5, gpus=8).amount == pytest.approx(55.04)
    assert cost_per_hour(p5, gpus=12).amount == pytest.approx(110.08)  # two instances
    assert run_cost(p5, gpus=1, steps=3600, step_seconds=1.0).amount == pytest.approx(55.04)
    assert billing_note(p5, gpus=1) == "1 of 8 GPUs of p5.48xlarge used: billed for 8"
    assert billing_note(p5, gpus=12) == "12 of 16 GPUs of p5.48xlarge x 2 used: billed for 16"
    assert billing_note(p5, gpus=8) == ""
    single = Price(per_gpu_hour=1.98, currency="CNY")  # seed 000, section 八: 4 cards, 7.92 元/小时
    assert single.gpus_per_instance == 1 and cost_per_hour(single, gpus=4).amount == pytest.approx(7.92)
    assert billing_note(single, gpus=3) == ""


@pytest.mark.parametrize("unit", [0, -8, 2.5, True, "8", 1025])
def test_a_unit_that_is_not_a_whole_number_of_gpus_is_refused(unit):
    with pytest.raises(CardError, match=r"gpus_per_instance must be a whole number of GPUs in 1\.\.1024"):
        Price(per_gpu_hour=1.0, currency="USD", gpus_per_instance=unit)
    with pytest.raises(CardError, match=r"entry 0: gpus_per_instance must be a whole number of GPUs in 1\.\.1024"):
        price_table_of({"entries": [{"gpu": "h100", "per_gpu_hour": 1, "currency": "USD", "gpus_per_instance": unit}]},
                       origin="t.json")


def test_every_catalog_entry_states_its_unit_and_8x_entries_are_8():
    """Every entry of the catalog's file states gpus_per_instance (no default stands in for a source), with a note
    quoting where; an entry whose label or id says "8x" (a whole 8-GPU instance) has unit 8."""
    raw = json.loads(resources.files("trainfit.catalog.data.prices").joinpath("prices.json").read_text(encoding="utf-8"))
    for e in raw["entries"]:
        assert isinstance(e.get("gpus_per_instance"), int) and e["gpus_per_instance"] >= 1, e["id"]
        assert f"gpus_per_instance {e['gpus_per_instance']}:" in e.get("notes", ""), e["id"]
    table = {p.id: p for p in catalog_price_table().entries}
    eights = [p for p in table.values() if re.search(r"\b8x\b", f"{p.label} {p.id}")]
    assert len(eights) == 7 and all(p.gpus_per_instance == 8 for p in eights)
    assert all(p.gpus_per_instance == 1 for p in table.values() if p not in eights)
    assert (table["aws-p5-h100-sxm"].instance, table["aws-p4d-a100-40gb"].instance) == ("p5.48xlarge", "p4d.24xlarge")


def test_cheapest_entry_is_chosen_per_card_count(tmp_path):
    """A single-GPU offer at 3.00 and an 8-GPU instance at 2.00 a GPU: 1 to 5 cards rent singles (5 x 3 = 15 < 16),
    6 to 8 the instance (16 < 18)."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"entries": [
        {"id": "single", "gpu": "h100-sxm", "per_gpu_hour": 3.0, "currency": "USD", "gpus_per_instance": 1},
        {"id": "node", "gpu": "h100-sxm", "per_gpu_hour": 2.0, "currency": "USD", "gpus_per_instance": 8},
    ]}))
    table = load_price_table(path)
    assert [table.for_gpu("h100-sxm", gpus=n).id for n in (1, 5, 6, 8, 9)] == ["single"] * 2 + ["node"] * 2 + ["single"]
    assert table.for_gpu("h100-sxm").id == "single"  # one card: no longer the lowest per-GPU figure
    assert cheapest_billed(table.candidates("h100-sxm"), gpus=16).id == "node"
    # a user's entry without the field rents single GPUs
    path.write_text('{"entries": [{"gpu": "h100", "per_gpu_hour": 2.5, "currency": "USD"}]}')
    assert load_price_table(path).entries[0].gpus_per_instance == 1


def test_plan_bills_a_preset_by_its_instance_and_says_so():
    plan = make_plan(load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {
        "gpu": "h100-sxm", "gpus_per_node": 2, "price_preset": "aws-p5-h100-sxm"}}))
    assert plan.billed_gpus == 8 and plan.cost_per_hour == pytest.approx(55.04)
    assert plan.billing_note == "2 of 8 GPUs of p5.48xlarge used: billed for 8"
    from trainfit.report.json_report import plan_to_dict

    cost = plan_to_dict(plan)["cost"]
    assert (cost["gpus_per_instance"], cost["billed_gpus"], cost["per_gpu_hour"]) == (8, 8, 6.88)


def test_card_states_the_unit_of_its_own_price():
    hw = {"gpu": "h100-sxm", "gpus_per_node": 2, "price_per_gpu_hour": 6.88, "currency": "USD"}
    own = make_plan(load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": hw}))
    assert own.billed_gpus == 2 and own.cost_per_hour == pytest.approx(13.76)  # per GPU unless stated
    whole = make_plan(load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {**hw, "price_gpus_per_instance": 8}}))
    assert whole.billed_gpus == 8 and whole.cost_per_hour == pytest.approx(55.04)
    assert whole.billing_note == "2 of 8 GPUs of one 8-GPU instance used: billed for 8"


@pytest.mark.parametrize(("hw", "expected"), [
    ({"price_per_gpu_hour": 1.0, "currency": "USD", "price_gpus_per_instance": 0}, "hardware.price_gpus_per_instance: 0 is not allowed; allowed: a whole number of GPUs 1 to 1024"),
    ({"price_per_gpu_hour": 1.0, "currency": "USD", "price_gpus_per_instance": "8x"}, "hardware.price_gpus_per_instance: '8x' is not allowed"),
    ({"price_per_gpu_hour": 1.0, "currency": "USD", "price_gpus_per_instance": True}, "hardware.price_gpus_per_instance: got a boolean (true), not a number"),
    ({"price_per_gpu_hour": 1.0, "currency": "USD", "price_gpus_per_instance": 2.5}, "hardware.price_gpus_per_instance: 2.5 is not allowed"),
    ({"price_gpus_per_instance": 8}, "hardware.price_gpus_per_instance: 8 is the rentable unit of hardware.price_per_gpu_hour, and the card gives none; allowed: null"),
    ({"gpu": "h100-sxm", "price_preset": "aws-p5-h100-sxm", "price_gpus_per_instance": 8}, "price_preset aws-p5-h100-sxm states its own unit"),
])
def test_card_unit_refusals_are_one_line(hw, expected):
    with pytest.raises((CardError, ValueError)) as err:
        load_card_dict({"hardware": hw})
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_stated_price_beside_a_price_preset_is_refused_in_one_line():
    """hardware.price_per_gpu_hour next to hardware.price_preset: before, the preset priced the plan (6.88 USD/GPU-h)
    and the stated 3 was dropped, silently. No framework preset fills either field (methods/presets.py), so both
    came from the user: refused naming the two fields."""
    card = {"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4,
                                                     "price_preset": "aws-p5-h100-sxm", "price_per_gpu_hour": 3,
                                                     "currency": "USD"}}
    with pytest.raises(CardError, match=r"hardware\.price_per_gpu_hour: 3 given together with "
                                        r"hardware\.price_preset aws-p5-h100-sxm"):
        load_card_dict(card)
    from trainfit.fit_search import card_price

    with pytest.raises(CardError, match=r"hardware\.price_per_gpu_hour: 3 given together with hardware\.price_preset"):
        card_price(card)
    for one in ("price_preset", "price_per_gpu_hour"):  # either alone still plans
        hw = {k: v for k, v in card["hardware"].items() if k != one}
        load_card_dict({**card, "hardware": hw})


def test_plan_refuses_a_price_beside_a_price_preset_exit_2():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "trainfit", "plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "h100-sxm",
                        "--gpus", "4", "--set", "hardware.price_preset=aws-p5-h100-sxm",
                        "--set", "hardware.price_per_gpu_hour=3"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "hardware.price_per_gpu_hour" in lines[0] and "hardware.price_preset" in lines[0]


@pytest.mark.parametrize(("gpus", "nodes", "unit", "billed"), [
    (8, 2, 8, 16), (12, 3, 8, 24), (16, 2, 8, 16), (8, 2, 1, 8), (8, 1, 8, 8), (6, 2, 4, 8), (10, 2, 4, 16),
])
def test_billed_gpus_bills_each_node_apart(gpus, nodes, unit, billed):
    """Each node is its own machine: nodes x ceil(gpus_per_node / unit) x unit (before, 2 nodes x 4 cards of an
    8-GPU instance billed 8, one machine, where the plan times collectives across two)."""
    assert billed_gpus(gpus=gpus, gpus_per_instance=unit, nodes=nodes) == billed


@pytest.mark.parametrize(("nodes", "per_hour", "billed"), [(1, 55.04, 8), (2, 110.08, 16), (3, 165.12, 24)])
def test_plan_bills_instances_per_node(nodes, per_hour, billed):
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4,
                                                                    "nodes": nodes,
                                                                    "price_preset": "aws-p5-h100-sxm"}})
    plan = make_plan(card)
    assert plan.billed_gpus == billed
    assert plan.cost_per_hour == pytest.approx(per_hour)
    if nodes > 1:
        assert plan.billing_note == (f"{4 * nodes} of {billed} GPUs of p5.48xlarge x {nodes} used, 4 on each of"
                                     f" {nodes} nodes billed apart: billed for {billed}")
    assert run_cost(Price(per_gpu_hour=6.88, currency="USD", gpus_per_instance=8), gpus=4 * nodes, nodes=nodes,
                    steps=3600, step_seconds=1.0).amount == pytest.approx(per_hour)
