"""verl's Megatron rows whose runs left Megatron-Core's RoPE unfused on packed (thd) micro-batches: verl's dense
converter sets no ``apply_rope_fusion`` (Megatron-Core's default is False) and these runs' scripts override none, so
``apply_rotary_pos_emb`` loops over the packed sequences (``_apply_rotary_pos_emb_thd``, a ``.tolist()`` then a
few kernels per sequence, for the query and the key of every layer). The GPG Megatron log prints the transformer
config with ``apply_rope_fusion=False``. The ISEEKYAN/verl_megatron_practice rows' script sets
``override_transformer_config.apply_rope_fusion=True``: no loop there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data"
S = load_step_times("trainfit_bench_step_times_verl_megatron_rope_loop")
LOOPED = {
    "gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2": "published_rl_times_firstcontact_2612g.json",
    "verl-pr1629-ppo-qwen2-7b-megatron-tp2pp2-h100-8g": "published_rl_times_verl_prs.json",
    "verl-pr1629-ppo-qwen2-7b-megatron-tp2-h100-8g": "published_rl_times_verl_prs.json",
    "verl-one-step-off-dapo-qwen25math7b-h20-colocate-megatron": "published_rl_times.json",
    "verl-one-step-off-dapo-qwen25math7b-h20-async-megatron": "published_rl_times.json",
}


def _entries(name: str) -> dict[str, dict]:
    return {e["id"]: e for e in json.loads((DATA / name).read_text())}


@pytest.mark.parametrize("row_id", sorted(LOOPED))
def test_the_unfused_rope_rows_cite_their_config_and_plan_the_loop(row_id: str) -> None:
    e = _entries(LOOPED[row_id])[row_id]
    tr = e["train"]
    assert tr["strategy"] == "megatron" and tr["packed_rope_loop"] is True
    src = tr["packed_rope_loop_source"]
    assert re.search(r"@[0-9a-f]{40}", src) and "apply_rope_fusion" in src
    # Megatron-Core's default and the loop, cited at core_v0.13.0
    assert "c550cf6c41c31cd3ec72e05c25ea0c979f2b6631" in src and "rope_utils.py" in src
    card, notes = S.map_rl(e)
    assert card["batch"]["packed_rope_loop"] is True
    assert any(n.startswith("batch.packed_rope_loop: RoPE per packed sequence") for n in notes)


def test_the_gpg_log_is_quoted_for_its_config() -> None:
    src = _entries(LOOPED["gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2"])[
        "gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2"]["train"]["packed_rope_loop_source"]
    assert "42e31cd07ea08b66e709a74e9aed2bd740589c34 l.672" in src and "'apply_rope_fusion=False'" in src


def test_no_other_rl_row_states_the_loop() -> None:
    """The flag is stated only where the run's config is read; the fused-RoPE verl_megatron_practice rows stay off."""
    stated = set()
    for f in sorted(DATA.glob("published_rl_times*.json")):
        for e in json.loads(f.read_text()):
            if (e.get("train") or {}).get("packed_rope_loop"):
                stated.add(e["id"])
    assert stated == set(LOOPED)
    mapped = 0
    for e in _entries("published_rl_times_verl_megatron_practice.json").values():
        try:
            card, _ = S.map_rl(e)
        except S.Unmapped:  # the rows the card cannot state (pipeline split of the rollout, ...)
            continue
        mapped += 1
        assert "packed_rope_loop" not in card["batch"], e["id"]
    assert mapped >= 8


def test_the_fused_rope_rows_say_why_they_do_not_loop() -> None:
    """The verl_megatron_practice GRPO rows' notes cite the script line that fuses RoPE, for the actor and, through
    verl's ref config, the reference."""
    rows = [e for e in _entries("published_rl_times_verl_megatron_practice.json").values()
            if e["id"].startswith("verlmp-grpo-qwen25-7b")]
    assert len(rows) == 8
    for e in rows:
        assert "override_transformer_config.apply_rope_fusion=True" in e["note"], e["id"]
        assert "qwen2.5_7b_megatron_vllm_benchmark.sh l.102 @f8e0d3a187afe6edbde583f46a5708a76a3423a3" in e["note"]
        assert "verl/trainer/config/ref/megatron_ref.yaml l.16" in e["note"]


def test_the_loop_slows_the_gpg_log_prob_pass() -> None:
    """Mapped and planned as the harness does: the old-policy pass of the GPG Megatron row (640 four-sequence
    micro-batches a rank) is slower with the loop than the same card without it."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    e = _entries(LOOPED["gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2"])[
        "gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2"]
    card, _ = S.map_rl(e)
    plain = {**card, "batch": {k: v for k, v in card["batch"].items() if k != "packed_rope_loop"}}
    looped_s = make_plan(load_card_dict(card)).time_parts["old_logprob"]
    plain_s = make_plan(load_card_dict(plain)).time_parts["old_logprob"]
    assert looped_s > plain_s * 1.3


def test_the_rl_passes_notes_quote_the_committed_table() -> None:
    """plan/rl_passes.py's Megatron paragraph quotes the loop rows' errors as benchmarks/step_times.json holds them
    (regenerated with the per-release loop counts), not the figures of an earlier tree."""
    import trainfit.plan.rl_passes as rl_passes

    doc = " ".join((rl_passes.__doc__ or "").split())
    assert "10.70 -> 10.83" not in doc
    points = {(p["id"], p["quantity"]): p for p in json.loads((REPO / "benchmarks" / "step_times.json").read_text())["points"]}

    def err(row_id: str, quantity: str) -> str:
        p = points[(row_id, quantity)]
        return f"{(p['trainfit_s'] / p['published_s'] - 1) * 100:+.1f} %"

    gpg = "gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2"
    for text in (f"GPG log-prob {err(gpg, 'logprob')}".replace("+", ""),
                 f"update {err(gpg, 'actor_update')}".replace("+", ""),
                 f"step {err(gpg, 'step')}".replace("+", ""),
                 f"PR 1629 steps {err('verl-pr1629-ppo-qwen2-7b-megatron-tp2pp2-h100-8g', 'step')} and"
                 f" {err('verl-pr1629-ppo-qwen2-7b-megatron-tp2-h100-8g', 'step')}",
                 f"one-step-off log-prob {err('verl-one-step-off-dapo-qwen25math7b-h20-colocate-megatron', 'logprob')}"
                 f" and {err('verl-one-step-off-dapo-qwen25math7b-h20-async-megatron', 'logprob')}"):
        assert text in doc, text


@pytest.mark.parametrize("row_id", sorted(LOOPED))
def test_the_loop_rows_state_their_megatron_core_release(row_id: str) -> None:
    """Each verl loop row states the Megatron-Core release verl's install names at the row's commit (a core_v0.12
    release), cited, and plans that release's loop (one .tolist(), one closing cat: spec.card.thd_rope_loop_of)."""
    from trainfit.spec.card import load_card_dict, thd_rope_loop_of
    from trainfit.spec.enums import ThdRopeLoop

    e = _entries(LOOPED[row_id])[row_id]
    sw = e["software"]
    assert sw["value"]["megatron-core"].startswith("0.12.")
    assert re.search(r"docs/start/install\.rst l\.\d+ @[0-9a-f]{40}", sw["source"])
    assert f"core_v{sw['value']['megatron-core']}" in sw["source"] or f"v{sw['value']['megatron-core']}" in sw["source"]
    card, _ = S.map_rl(e)
    assert card["software"]["megatron-core"] == sw["value"]["megatron-core"]
    assert thd_rope_loop_of(load_card_dict(card)) is ThdRopeLoop.CAT
