"""benchmarks/step_times.py, the NeMo Framework 25.02 (DGX-B200 / DGX-H100) and 25.04 (DGX-GB200) FP8 pre-training
rows (published_train_times_nemo_2502_2504.json): the file is picked up, every row's numbers are the ones its quote
shows, the layouts map to the card (TP/PP/CP/VP/EP, Megatron FSDP, the 405B recipe's pipeline split, the release's FP8
recipe), the inline shapes have the models' parameter counts, and Nemotron-4's squared-ReLU MLP is not representable
but still scored by the rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import from_catalog
from trainfit.memory.weights import total_params

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_nemo_2502_2504.json"

st = load_step_times("trainfit_bench_step_times_nemo_2502_2504")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = {e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name}
    assert loaded == set(ROWS) and len(ROWS) == 17


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_fields_are_the_quoted_cells(row_id: str) -> None:
    e = ROWS[row_id]
    cells = [c.strip() for c in e["quote"].split("|")]
    if row_id.startswith("nemo2504"):  # the 25.04 table has an FSDP column after the sequence length
        fsdp = cells.pop(5)
        assert (e["parallel"]["strategy"] == "fsdp") == (fsdp == "1")
    gpus, gbs, mbs, seq, tp, pp, cp, vp, ep, ga, tok = (cells[1:12])
    if "mixtral-8x22b" in row_id:  # GBS and MBS printed swapped on the page (see the entry's note)
        gbs, mbs = mbs, gbs
    b, p = e["batch"], e["parallel"]
    assert (e["gpus"], b["global_batch_size"], b["micro_batch_size"], b["seq_len"]) == tuple(map(int, (gpus, gbs, mbs, seq)))
    assert (p["tp"], p["pp"], p["cp"], p["vpp"] or 1, p["ep"], b["grad_accum"]) == tuple(map(int, (tp, pp, cp, vp, ep, ga)))
    assert e["measured"]["value"] == float(tok)
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert b["global_batch_size"] == b["micro_batch_size"] * dp * b["grad_accum"]
    assert e["nodes"] * e["gpus_per_node"] == e["gpus"]
    # the published figure as seconds per step: GBS x seq / (tokens/s/GPU x GPUs)
    tokens = st.train_tokens_per_step(e)
    assert st.published_train_seconds(e, tokens) == pytest.approx(
        b["global_batch_size"] * b["seq_len"] / (float(tok) * e["gpus"]))


def test_405b_row_maps_tp_pp_cp_vp_and_the_recipes_pipeline_split() -> None:
    card, notes = st.map_train(ROWS["nemo2504-gb200-llama3-405b-pt-fp8-128g"])
    assert any("pipeline_layout from Megatron-Core" in n for n in notes)
    par = card["parallel"]
    assert (par["tensor_parallel"], par["pipeline_parallel"], par["context_parallel"], par["virtual_stages"]) == (4, 8, 2, 8)
    assert par["sequence_parallel"] and par["tp_comm_overlap"] and par["overlap_param_gather"]
    assert par["strategy"] == "zero1" and par["gradient_checkpointing"] is False
    # 126 layers + embedding + loss over 64 virtual stages: the first and last chunk one layer fewer
    assert len(par["pipeline_layout"]) == 64 and sum(par["pipeline_layout"]) == 126
    assert par["pipeline_layout"][0] == par["pipeline_layout"][-1] == 1
    assert card["precision"]["fp8_recipe"] == "current"
    assert card["hardware"] == {"gpu": "gb200", "gpus_per_node": 4, "nodes": 32}
    assert card["batch"] == {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 32}


def test_2502_rows_use_delayed_scaling_and_fsdp_row_maps_to_fsdp() -> None:
    card, _ = st.map_train(ROWS["nemo2502-b200-llama3-70b-pt-fp8-64g"])
    assert card["precision"]["fp8_recipe"] == "delayed"
    card, _ = st.map_train(ROWS["nemo2504-gb200-llama3-70b-pt-fp8-64g"])
    assert card["parallel"]["strategy"] == "fsdp" and "overlap_param_gather" not in card["parallel"]
    assert card["batch"]["grad_accum"] == 2


@pytest.mark.parametrize(("row_id", "total"), [
    ("nemo2502-b200-mixtral-8x7b-pt-fp8-64g", 46.70e9),     # Mixtral-8x7B: 46.7B parameters
    ("nemo2502-b200-mixtral-8x22b-pt-fp8-256g", 140.6e9),   # Mixtral-8x22B: 140.6B parameters (v0.1, vocab 32000)
    ("nemo2502-b200-gpt3-175b-pt-fp8-512g", 175.0e9),       # GPT-3 175B
])
def test_inline_shapes_have_the_models_parameter_counts(row_id: str, total: float) -> None:
    e = ROWS[row_id]
    spec = spec_from_hf_config(e["model_config"], name=e["model"], source="test")
    assert total_params(spec) == pytest.approx(total, rel=0.01)


def test_mixtral_plans_eight_experts_top2_over_ep8() -> None:
    card, _ = st.map_train(ROWS["nemo2504-gb200-mixtral-8x7b-pt-fp8-64g"])
    assert card["parallel"]["expert_parallel"] == 8 and "tensor_parallel" not in card["parallel"]
    assert card["model"] == "mistralai/Mixtral-8x7B-v0.1"  # the catalog's Mixtral (no q/k norms), not the stand-in
    spec = from_catalog(card["model"])
    assert spec.family == "mixtral" and not spec.qk_norm
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.moe.shared_expert_intermediate_size) == (8, 2, 0)


@pytest.mark.parametrize("row_id", [i for i in ROWS if "nemotron4" in i])
def test_nemotron_is_not_representable_but_has_a_rule_count(row_id: str) -> None:
    e = ROWS[row_id]
    with pytest.raises(st.Unmapped) as err:
        st.map_train(e)
    assert err.value.status == "not_representable" and "non-gated MLP" in err.value.reasons[0]
    n, how = st.rule_params(e["model"], e["model_config"])
    c = e["model_config"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    h = c["hidden_size"]
    by_hand = c["num_hidden_layers"] * (h * (2 * q + 2 * kv) + 2 * h * c["intermediate_size"]) + h * c["vocab_size"]
    assert n == by_hand and "non-gated" in how
    # Nemotron-4 15B: 15.6B with its 1.57B input embedding; 340B: 341B with 4.72B (matmul counts exclude it)
    assert n == pytest.approx(14.05e9 if "15b" in row_id else 336.3e9, rel=0.01)
