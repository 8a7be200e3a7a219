"""batch.packed_sample_tokens: the card field, its checks, and what it changes in the plan (only attention time)."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(attention="flash", method="sft", **batch):
    return {"model": {"id": "meta-llama/Llama-3.1-8B"}, "method": method,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 8192, **batch}, "attention": attention}


def _attention_s(plan) -> float:
    return sum(p.terms.get("attention", 0.0) for p in plan.time.phases)


def _plan(**kw):
    return make_plan(load_card_dict(_card(**kw)))


@pytest.mark.parametrize("bad, msg", [
    ({"packed_sample_tokens": 9000}, "batch.packed_sample_tokens: 9000 is more than a row (batch.seq_len 8192); allowed: 1 to 8192"),
    ({"packed_sample_length_cv": 0.5}, "batch.packed_sample_length_cv: only read with batch.packed_sample_tokens"),
    ({"packed_sample_tokens": 4096, "packed_sample_length_cv": 1.5},
     ("batch.packed_sample_length_cv: 1.5 with a mean of 4096 tokens implies samples longer than the 8192-token row;"
      " allowed: 0 to 1")),
    ({"packed_sample_tokens": 0}, "batch.packed_sample_tokens: input should be greater than or equal to 1"),
])
def test_bad_values_are_one_line_naming_the_field(bad, msg):
    with pytest.raises(CardError) as e:
        load_card_dict(_card(**bad))
    assert str(e.value).startswith(msg) and "\n" not in str(e.value)


def test_rl_methods_refuse_the_field():
    card = _card(method="grpo", packed_sample_tokens=512)
    with pytest.raises(CardError, match="batch.packed_sample_tokens: read for sft, rm and dpo; grpo"):
        load_card_dict(card)


def test_unset_is_the_one_sequence_plan():
    a, b = _plan(), _plan(packed_sample_tokens=None)
    assert a.time.total_s == b.time.total_s and a.time.phases == b.time.phases
    # no packed-row note; only the unpacked card's own line (attention over each whole row, and how to state packing)
    assert not any(x.startswith("time: packed rows") for x in a.time.assumptions)
    assert sum("one sequence a row (batch.packed_sample_tokens unset)" in x for x in a.time.assumptions) == 1


def test_flash_packs_shrink_only_attention():
    row, packed = _plan(), _plan(packed_sample_tokens=512)
    assert _attention_s(packed) < _attention_s(row) / 8
    def gemm(p):
        return sum(ph.terms.get("gemm", 0.0) for ph in p.time.phases)

    assert gemm(packed) == pytest.approx(gemm(row))
    assert any("causal span of 512 keys" in x for x in packed.time.assumptions)
    # memory is the row's: flash keeps O(seq) state, packed or not
    assert packed.peak.device == row.peak.device
    spread = _plan(packed_sample_tokens=512, packed_sample_length_cv=1.0)
    assert _attention_s(packed) < _attention_s(spread) < _attention_s(row)


def test_eager_computes_the_whole_row_and_sdpa_every_block():
    eager_row, eager_packed = _plan(attention="eager"), _plan(attention="eager", packed_sample_tokens=512)
    assert eager_packed.time.total_s == eager_row.time.total_s
    assert eager_packed.peak.device == eager_row.peak.device
    sdpa_row, sdpa_packed = _plan(attention="sdpa"), _plan(attention="sdpa", packed_sample_tokens=512)
    # SDPA given the packed block mask: every key block (twice the causal work) on the memory-efficient kernel, at
    # half FlashAttention-2's rate (compute.attention_time.MEM_EFFICIENT_TO_FA2_RATE; head dim 128: no padded tile)
    from trainfit.compute.attention_time import MEM_EFFICIENT_TO_FA2_RATE

    assert _attention_s(sdpa_packed) == pytest.approx(2 * _attention_s(sdpa_row) / MEM_EFFICIENT_TO_FA2_RATE)


def test_cli_refuses_a_sample_longer_than_the_row_in_one_line(tmp_path, capsys):
    from trainfit.cli.main import main

    card = tmp_path / "card.yaml"
    card.write_text("model: meta-llama/Llama-3.1-8B\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"
                    "batch: {seq_len: 4096, packed_sample_tokens: 5000}\nattention: flash\n")
    assert main(["plan", str(card)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("trainfit: error: batch.packed_sample_tokens: 5000 is more than a row (batch.seq_len 4096);"
                   " allowed: 1 to 4096, or null (one sequence per row)")
