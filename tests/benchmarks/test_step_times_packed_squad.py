"""step_times: the SFT / LoRA rows that fine-tune on packed SQuAD v1.1 (NeMo 24.07 / 2.0, Megatron-Bridge) are planned with
the sample lengths measured for their pipeline and tokenizer (benchmarks/data/packed_sample_lengths.json), so
attention runs per sample; other rows are left alone. The measuring script's pure parts are checked on small input."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys

import pytest
from step_times_module import REPO, load_step_times

st = load_step_times("step_times_packed_squad")
DATA = json.loads((REPO / "benchmarks" / "data" / "packed_sample_lengths.json").read_text())

_spec = importlib.util.spec_from_file_location("packed_sample_lengths",
                                               REPO / "benchmarks" / "packed_sample_lengths.py")
assert _spec is not None and _spec.loader is not None
psl = importlib.util.module_from_spec(_spec)
sys.modules["packed_sample_lengths"] = psl
_spec.loader.exec_module(psl)

SQUAD_ROWS = {  # the published rows whose notes or recipes name packed SQuAD v1.1 at 4,096 tokens
    "nemo-h100-llama2-7b-sft-fp8", "nemo-h100-llama2-70b-lora-fp8", "nemo-h100-llama2-13b-sft-fp8-2407",
    "nemo-h100-llama2-70b-sft-fp8-2407", "nemo-h100-llama2-7b-lora-fp8-2407", "nemo-h100-llama2-13b-lora-fp8-2407",
    "mbridge-2606-gb200-llama3-70b-sft-fp8-32g", "mbridge-2606-h100-llama3-70b-sft-fp8-32g",
    "mbridge-2606-gb200-llama3-70b-lora-fp8-8g", "mbridge-2606-h100-llama3-70b-lora-fp8-8g",
    "mbridge-2606-gb300-llama3-70b-sft-fp8-32g", "mbridge-2606-gb300-llama3-70b-lora-fp8-8g",
    # the MXFP8 rows of the same 26.06 SFT / LoRA tables (published_train_times_megatron_bridge_perf_lowp.json)
    "mbridge-2606-gb300-llama3-70b-sft-mxfp8-32g", "mbridge-2606-gb200-llama3-70b-sft-mxfp8-32g",
    "mbridge-2606-gb300-llama3-70b-lora-mxfp8-8g", "mbridge-2606-gb200-llama3-70b-lora-mxfp8-8g",
    # NeMo 2.0 llm.finetune (NVIDIA/dgxc-benchmarking ft_llama3 @741c886): 8B SFT / LoRA at 8, 16, 32 GPUs,
    # 70B SFT at 32, 70B LoRA at 8, 16, 32, each BF16 and FP8
    *(f"dgxc2504-h100-llama3-8b-{k}-{d}-{g}g" for k in ("sft", "lora") for d in ("bf16", "fp8")
      for g in (8, 16, 32)),
    *(f"dgxc2504-h100-llama3-70b-sft-{d}-32g" for d in ("bf16", "fp8")),
    *(f"dgxc2504-h100-llama3-70b-lora-{d}-{g}g" for d in ("bf16", "fp8") for g in (8, 16, 32)),
}


def _train() -> list[dict]:
    return st.load_entries(st.TRAIN_DATA)


def test_the_data_file_is_consistent_and_cites_its_sources():
    assert DATA["entries"] and DATA["data"]["repo"] and len(DATA["data"]["commit"]) == 40
    for x in DATA["entries"]:
        assert x["samples"] > 10_000 and x["articles"] >= 48 and x["pack_tokens"] == 4096
        mean, cv = x["mean_tokens"], x["cv"]
        assert 1 <= x["p50_tokens"] <= x["max_tokens"] <= x["pack_tokens"] and mean <= x["max_tokens"]
        # the stored moments agree with each other: E[s^2] = mean^2 (1 + cv^2), context = E[s^2] / mean
        assert x["mean_sq_tokens"] == pytest.approx(mean * mean * (1 + cv * cv), rel=3e-3)
        assert x["context_tokens"] == pytest.approx(x["mean_sq_tokens"] / mean, rel=1e-3)
        assert 0 < x["se"]["mean_tokens"] < 0.1 * mean
        check = x["packed_rows_check"]
        assert 0.9 < check["fill"] <= 1 and check["rows"] * 4096 * check["fill"] == pytest.approx(
            x["samples"] * mean, rel=1e-3)
        for key in x["sources"]:
            src = DATA["sources"][key]
            assert src["repo"] and src["path"] and re.fullmatch(r"[0-9a-f]{40}", src["commit"]), key
        assert x["framework"] in st.FP8_RECIPES and all(m.startswith("meta-llama/") for m in x["models"])


def test_every_packed_squad_row_gets_its_pipelines_lengths():
    seen = set()
    for e in _train():
        if e["id"] not in SQUAD_ROWS:
            continue
        seen.add(e["id"])
        card, notes = st.map_train(e)
        x = next(x for x in DATA["entries"] if x["framework"] == e["framework"] and e["model"] in x["models"])
        assert card["batch"]["packed_sample_tokens"] == round(x["mean_tokens"]), e["id"]
        assert card["batch"]["packed_sample_length_cv"] == x["cv"], e["id"]
        assert any(n.startswith(f"packed SQuAD v1.1: {x['mean_tokens']} tokens per sample") for n in notes)
        st.validate(card)  # the card's own check: mean (1 + cv^2) fits the row
    assert seen == SQUAD_ROWS


def test_the_lengths_shorten_the_planned_step():
    """Attention per ~200-token sample instead of the 4,096-token row: the planned step is shorter."""
    e = next(x for x in _train() if x["id"] == "nemo-h100-llama2-7b-lora-fp8-2407")
    card, _ = st.map_train(e)
    packed = st.plan_card(card)
    whole = copy.deepcopy(card)
    del whole["batch"]["packed_sample_tokens"], whole["batch"]["packed_sample_length_cv"]
    assert packed.step_s < 0.9 * st.plan_card(whole).step_s


def test_other_rows_are_left_alone():
    for e in _train():
        if e["id"] in SQUAD_ROWS:
            continue
        assert st.packed_squad(e) == ({}, []), e["id"]
    row = copy.deepcopy(next(x for x in _train() if x["id"] == "mbridge-2606-h100-llama3-70b-lora-fp8-8g"))
    row["model"] = "meta-llama/Llama-3.1-8B"  # a model no measurement was made for
    assert st.packed_squad(row) == ({}, [])
    row = copy.deepcopy(next(x for x in _train() if x["id"] == "nemo-h100-llama2-7b-lora-fp8-2407"))
    row["batch"]["seq_len"] = 2048  # another row length: not the measured packing
    assert st.packed_squad(row) == ({}, [])


def test_sample_tokens_follow_the_template_and_the_shift():
    rows = [("a", "one two", "q?", " ans ")]
    words = str.split  # one token a word
    # "Context: one two Question: q? Answer:" = 6 words, the answer 1, EOS 1, minus the input/label shift
    assert psl.sample_tokens(rows, words, space_separator=False) == [6 + 1 + 1 - 1]
    assert psl.sample_tokens(rows, lambda s: list(s), space_separator=True)[0] == (
        len("Context: one two Question: q? Answer:") + len(" ans") + 1 - 1)
    long = [("a", "w " * 5000, "q", "x")]
    assert psl.sample_tokens(long, words, space_separator=False) == [4095]  # truncated to the row, then shifted


def test_moments_and_packing_padding():
    m = psl.moments([100, 300])
    assert m["mean"] == 200 and m["mean_sq"] == 50_000 and m["context"] == 250
    assert m["cv"] == pytest.approx(0.5)
    # two samples that share a row: 4096 - 3000 = 1096 tokens of padding
    nemo = psl.simulate_packing([1000, 2000], padding="last_sample")
    own = psl.simulate_packing([1000, 2000], padding="own_segment")
    assert nemo["rows"] == own["rows"] == 1 and nemo["fill"] == pytest.approx(3000 / 4096)
    # NeMo stretches the row's last sample over the padding (which one is last depends on the shuffle)
    assert round(nemo["row_context"] * 4096) in {1000**2 + (2000 + 1096) ** 2, 2000**2 + (1000 + 1096) ** 2}
    assert own["row_context"] * 4096 == 1000**2 + 2000**2 + 1096**2
    assert psl.simulate_packing([4096, 4096, 1], padding="own_segment")["rows"] == 3
