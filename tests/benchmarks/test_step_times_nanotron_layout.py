"""The Ultra-Scale Playbook's nanotron rows map nanotron's cost-balanced pipeline split (``memory.pipeline.nanotron_layout``)
as the card's ``parallel.pipeline_layout``; a split the even rule refuses (80 layers over 32 stages) is then planned."""

from __future__ import annotations

from step_times_module import load_step_times

st = load_step_times("step_times_nanotron_layout")


def _rows() -> dict:
    return {e["id"]: e for e in st.load_entries(st.TRAIN_DATA) if e["id"].startswith("ups-")}


def test_pipeline_rows_state_nanotrons_split():
    rows = _rows()
    card, notes = st.map_train(rows["ups-h100-1p34b-64n-dp128tp2pp2-z1"])
    assert card["parallel"]["pipeline_layout"] == [11, 5]  # the head's rank (costed 4 layers) takes 5
    assert any("nanotron's split balanced by its block costs" in n for n in notes)
    card, _ = st.map_train(rows["ups-h100-8p86b-1n-dp2tp1pp4-z1"])
    assert card["parallel"]["pipeline_layout"] == [9, 9, 8, 6]
    card, _ = st.map_train(rows["ups-h100-3p57b-64n-dp128tp4pp1-z1"])
    assert "pipeline_layout" not in card["parallel"]  # no pipeline


def test_eighty_layers_over_thirty_two_stages_is_planned():
    card, _ = st.map_train(_rows()["ups-h100-80b-16n-dp1tp4pp32-z0"])
    layout = card["parallel"]["pipeline_layout"]
    assert len(layout) == 32 and sum(layout) == 80 and layout[-1] == 1
    planned = st.plan_card(card)
    assert planned.step_s and planned.step_s > 0
