"""benchmarks/step_times.py: no silent drops, the rule of thumb, the split and the metric conversions.

Hand-computed figures are written out as arithmetic on the published numbers, so a reader can
check them without running the harness.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.errors import CardError

REPO = Path(trainfit.__file__).resolve().parents[2]


S = load_step_times("trainfit_bench_step_times")
TRAIN = json.loads(S.TRAIN_DATA.read_text())
RL = json.loads(S.RL_DATA.read_text())
BY_ID = {e["id"]: e for e in TRAIN + RL}


@pytest.fixture(scope="module")
def result():
    return S.build()


def _row(result, pid: str, quantity: str = "step"):
    (row,) = [r for r in result["rows"] if r.id == pid and r.quantity == quantity]
    return row


@pytest.mark.parametrize("entries,mapper", [(TRAIN, S.map_train), (RL, S.map_rl)], ids=["train", "rl"])
def test_every_entry_maps_to_a_valid_card_or_gives_a_reason(entries, mapper):
    assert len({e["id"] for e in entries}) == len(entries)
    for e in entries:
        try:
            card, _notes = mapper(e)
        except S.Unmapped as u:
            assert u.status in ("not_representable", "skipped"), e["id"]
            assert u.reasons and all(r.strip() for r in u.reasons), e["id"]
            continue
        try:
            S.validate(card)
        except CardError as exc:  # the harness lists it as not representable, with this message
            assert str(exc), e["id"]


def test_the_ledger_lists_every_entry_once_with_a_status(result):
    ledger = {x["id"]: x for x in result["ledger"]}
    assert len(ledger) == len(result["ledger"])
    assert set(BY_ID) <= set(ledger)
    for x in result["ledger"]:
        assert x["status"] in ("mapped", "not_representable", "skipped")
        assert (x["status"] == "mapped") == (not x["reasons"]), x
    mapped = [r for r in result["rows"] if r.status == "mapped"]
    assert mapped and all(r.published_s and r.published_s > 0 for r in result["rows"])
    n = result["counts"]
    assert n["mapped"]["n"] + n["not_representable"]["n"] + n["skipped"]["n"] == len(ledger)


def test_model_parallelism_maps_onto_the_card():
    card, _ = S.map_train(BY_ID["titan-h100-70b-256gpu-fsdp32-tp8"])
    assert card["parallel"]["tensor_parallel"] == 8
    card, _ = S.map_rl(BY_ID["verl-one-step-off-dapo-qwen25math7b-h20-colocate-fsdp2"])
    assert card["parallel"]["context_parallel"] == 4 and card["parallel"]["context_parallel_kind"] == "ulysses"
    assert S.parallel_blockers({"cp": 2, "sequence_parallel_ulysses": 4}) == ["ring context parallel 2 together with Ulysses 4"]


def test_rule_of_thumb_for_a_hand_checked_entry(result):
    # torchtitan, Llama-3.1-8B, 64 A100-80GB, local batch 1 x 8192 tokens
    n = 8_030_261_248 - 128_256 * 4096  # total parameters minus the (untied) input embedding
    tokens = 64 * 1 * 8192
    expected = 6 * n * tokens / (64 * 312e12 * 0.40)
    row = _row(result, "titan-a100-8b-sel-layer")
    assert row.rule_s == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(2.9558, abs=1e-4)


def test_rl_rule_for_a_hand_checked_entry(result):
    # NeMo RL v0.5, GRPO Llama-3.1-8B one step off, 16 H100, 64 prompts x 32, mean response 1123; an asynchronous
    # row's prompt is the median of the on-policy Llama-3.1-8B rows' (each derived from its published tokens/s)
    prompt = sorted([round(1581 * 16 * 92.8 / 2048 - 1019), round(3359 * 8 * 91.0 / 2048 - 1066),
                     round(1562 * 16 * 97.7 / 2048 - 1060)])[1]
    assert prompt == 128
    n = 8_030_261_248 - 128_256 * 4096
    flops = 6 * n * 64 * 32 * (prompt + 1123) + 2 * n * 64 * 32 * 1123
    row = _row(result, "nemorl-v05-grpo-llama31-8b-h100-bf16-16g-off1")
    assert row.rule_s == pytest.approx(flops / (16 * 989.4e12 * 0.40), rel=1e-9)  # H100 SXM dense bf16 peak


def test_split_is_deterministic_and_roughly_balanced():
    assert S.half_of("titan-a100-8b-sel-layer") == 1
    assert S.half_of("tune-a100-70b-lora") == 0
    ids = list(BY_ID)
    assert [S.half_of(i) for i in ids] == [S.half_of(i) for i in ids]
    share = sum(S.half_of(i) == 0 for i in ids) / len(ids)
    assert 0.35 < share < 0.65


def test_phases_of_one_entry_share_its_half(result):
    halves: dict[str, set[int]] = {}
    for r in result["rows"]:
        halves.setdefault(r.id, set()).add(r.half)
    assert all(len(h) == 1 for h in halves.values())


def test_metric_conversions():
    e = BY_ID["titan-a100-8b-sel-layer"]  # tokens/s per GPU
    assert S.published_train_seconds(e, 64 * 8192) == pytest.approx(64 * 8192 / (2904 * 64))
    e = BY_ID["tune-a100-70b-lora"]  # tokens/s over all 8 GPUs; 8 x 2 x 2048 tokens per step
    assert S.published_train_seconds(e, 8 * 2 * 2048) == pytest.approx(32768 / 3497)
    e = BY_ID["qwen1-a100-7b-lora-4k"]  # seconds per iteration
    assert S.published_train_seconds(e, 8 * 4096) == 10.1
    e = BY_ID["titan-h100-70b-256gpu-fsdp32-tp8"]  # not representable: global batch 512 x 8192
    assert S.train_tokens_per_step(e) == 512 * 8192
    assert S.published_train_seconds(e, S.train_tokens_per_step(e)) == pytest.approx(512 * 8192 / (597.3 * 256))
    secs, note = S.published_rl_seconds(BY_ID["areal-v03-ppo-r1distill-1.5b-sync-128g"])  # 41.0 h over 1000 steps
    assert secs == pytest.approx(41.0 * 3600 / 1000) and "1000 steps" in note
    assert S.published_rl_seconds(BY_ID["nemorl-v05-grpo-llama31-8b-h100-bf16-16g-off1"])[0] == 64.8


def test_mapped_tokens_per_step_match_the_plan(result):
    for r in result["rows"]:
        if r.status == "mapped" and r.quantity == "step" and r.subset in ("SFT full", "LoRA / QLoRA", "pretrain"):
            assert not any(n.startswith("plan counts") for n in r.notes), (r.id, r.notes)


def test_time_parts_are_assigned_to_published_phases():
    assert S.part_phase("generation") == "generation"
    assert S.part_phase("time.old_logprob") == S.part_phase("frozen_forward_passes") == "logprob"
    assert S.part_phase("train_compute") == S.part_phase("actor_update") == "actor_update"
    assert S.part_phase("weight_sync") == "weight_sync"
    assert S.part_phase("critic_update") == S.part_phase("critic_values") == "other"


def test_a_plan_with_timed_phases_is_read_through_them(monkeypatch):
    import trainfit.plan

    phases = (SimpleNamespace(name="generation", seconds=1.5, bound="memory"),
              SimpleNamespace(name="old_logprob", seconds=0.5, bound="compute"),
              SimpleNamespace(name="ref_logprob", seconds=0.25, bound="compute"),
              SimpleNamespace(name="actor_update", seconds=2.5, bound="compute"))
    fake = SimpleNamespace(step_seconds=4.75, tokens_per_step=10.0, fits=True, time=SimpleNamespace(phases=phases),
                           time_parts={"train_compute": 2.0, "generation": 1.0})
    monkeypatch.setattr(trainfit.plan, "make_plan", lambda card: fake)
    planned = S.plan_card({"method": "grpo"})
    assert planned.bound == "compute"  # the largest timed phase's
    assert S.phase_seconds(planned, "generation") == (1.5, ["time.generation"])
    assert S.phase_seconds(planned, "logprob") == (0.75, ["time.old_logprob", "time.ref_logprob"])
    assert S.phase_seconds(planned, "actor_update") == (2.5, ["time.actor_update"])
    assert S.phase_seconds(planned, "weight_sync") == (None, [])
    assert S.phase_bound(planned, ["time.old_logprob", "time.ref_logprob"]) == "compute"


def test_json_is_deterministic(result):
    assert S.render_json(result) == S.render_json(S.build())


def test_a_published_rate_above_the_cards_peak_is_skipped_with_its_reason(result):
    # torchtune README, Llama-3.1-8B on one RTX A6000 (154.8 dense bf16 TFLOP/s), 2 x 2048 tokens per step, AC on:
    # LoRA at 4699 tok/s needs (4 + 2 recompute) x 7.50e9 x 4699 = 211 TFLOP/s; the full fine-tune at 2579 tok/s
    # (4 + 2 dW + 2 recompute) x 7.50e9 x 2579 = 155 TFLOP/s: both at or above every tensor core doing nothing else
    row = _row(result, "tune-a6000-8b-lora")
    assert row.status == "skipped" and row.trainfit_s is None
    assert row.notes[0].startswith("implausible: the published rate needs 136.69%")
    assert _row(result, "tune-a6000-8b-full").status == "skipped"
    assert _row(result, "tune-4090-8b-lora").status == "mapped"  # 3083 tok/s x 6·N on a 4090: 84% of 165 TFLOP/s
    no_ac = dict(BY_ID["tune-a6000-8b-full"], activation_checkpointing="none")
    assert S.implausible_rate(no_ac, 7.50e9, 4096, 4096 / 2579) is None  # 6·N: 75%


def test_published_hardware_rates_become_a_calibration():
    # torchtitan's Grand Teton H100s: 500 W of the SXM's 700 W, 2.4 TB/s HBM2e
    cal, notes = S.hardware_calibration(BY_ID["titan-h100-8b-8gpu"], "h100-sxm")
    over = cal.device("h100-sxm").overrides()
    assert over["matmul_flops_per_s"] == pytest.approx(989.4e12 * 0.803 * (500 / 700) ** (1 / 3), rel=1e-9)
    assert over["hbm_bytes_per_s"] == pytest.approx(2.4e12 * 0.90)
    assert "power limit 500 W of 700 W" in notes[0]
    assert S.hardware_calibration(BY_ID["titan-a100-8b-sel-op"], "a100-80gb") == (None, [])


def test_megatron_frameworks_plan_with_fused_kernels():
    card, notes = S.map_train(BY_ID["nemo-h100-llama2-7b-sft-fp8"])
    assert card["parallel"]["compile"] is True and any("Transformer Engine fused kernels" in n for n in notes)
    card, _ = S.map_train(BY_ID["tune-a100-3b-ac"])
    assert card["parallel"]["compile"] is True  # stated
    card, _ = S.map_train(BY_ID["titan-h100-8b-8gpu"])
    assert card["parallel"]["compile"] is False


def test_attention_and_adapter_dtype_follow_the_framework():
    assert S.attention_of(BY_ID["automodel-h100-gpt-oss-20b"]) == "flash"  # FlexAttention, not transformers' eager
    assert S.attention_of(BY_ID["mbridge-h100-gpt-oss-120b-bf16"]) == "flash"  # Transformer Engine fused attention
    assert S.attention_of(BY_ID["titan-h100-8b-8gpu"]) == "sdpa"
    card, _ = S.map_train(BY_ID["qwen1-a100-7b-lora-4k"])  # HF Trainer, bf16 autocast: the adapters' GEMMs in bf16
    assert card["lora"]["adapter_dtype"] == "bf16"


def test_xtuner_sequence_parallel_is_ulysses():
    # xtuner/parallel/sequence/attention.py: all-to-all on q, k, v (heads scattered, sequence gathered)
    card, _ = S.map_train(BY_ID["xtuner-a100-8b-32k-sp4"])
    assert card["parallel"]["context_parallel"] == 4 and card["parallel"]["context_parallel_kind"] == "ulysses"


def test_torchtune_chunked_output_loss_maps_onto_the_chunked_loss():
    card, notes = S.map_train(BY_ID["tune-4090-8b-full"])  # CEWithChunkedOutputLoss in the 8B single-device config
    assert card["loss"] == {"chunked": True} and any("loss.chunked" in n for n in notes)
    card, _ = S.map_train(BY_ID["tune-a100-3b-ac"])  # cumulative table: + Chunked Cross Entropy precedes + AC
    assert card["loss"] == {"chunked": True}
    card, _ = S.map_train(BY_ID["tune-a100-3b-packed-compile"])  # the row before + Chunked Cross Entropy
    assert "loss" not in card


def test_pipeline_flushes_add_the_bubble_per_flush():
    e = BY_ID["automodel-h100-llama3-70b-lora"]  # 8 schedule.step calls per optimizer step
    card, _ = S.map_train(e)
    once = S.plan_card(card)
    eight = S.plan_card(card)
    notes = S.pipeline_flushes(e, eight)
    assert eight.step_s - once.step_s == pytest.approx(7 * once.parts["time.pipeline_bubble"])
    assert notes and "8 pipeline flushes" in notes[0]
    assert S.pipeline_flushes(BY_ID["automodel-h100-llama3-70b-lora-tp2-fsdp4"], S.plan_card(card)) == []


def test_an_entrys_checked_text_is_rendered_in_full_and_kept_out_of_the_json(result):
    checked = {e["id"]: e["checked"] for e in TRAIN + RL if e.get("checked")}
    assert checked  # the outliers whose entry records what was looked into
    md = S.render_md(result)
    section = md.split("## What the model does not know", 1)[1]
    for pid, text in checked.items():
        assert f"**{pid}**" in section and S._cell(text) in section
    points = json.loads(S.render_json(result))["points"]
    assert all("checked" not in p for p in points)


def test_model_aliases_name_only_models_outside_the_catalog():
    """resolve_model looks a name up in the catalog first: an alias whose key the catalog holds would never be read."""
    from trainfit.catalog.models import catalog_ids

    ids = set(catalog_ids())
    assert not [k for k in S.MODEL_ALIASES if k in ids]
    assert all(v in ids for v in S.MODEL_ALIASES.values())
