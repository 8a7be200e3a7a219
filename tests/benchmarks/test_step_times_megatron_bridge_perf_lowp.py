"""benchmarks/step_times.py, Megatron-Bridge's MXFP8 / NVFP4 rows (the 25.09 table's parenthesised FP8-MX figures among
them, and the GB300 / B300 rows in BF16 or FP8 current scaling no earlier file holds) of
published_train_times_megatron_bridge_perf_lowp.json: the file is picked up, its ids are unique
across the training files, each quote is a row of its table whose cells give the card's layout, batch, precision and
measured figures, every note cites the preset or recipe it read at a 40-hex commit and says which layers stay bf16, and
every row either plans or gives the harness's reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_megatron_bridge_perf_lowp.json"
st = load_step_times("trainfit_bench_step_times_megatron_bridge_perf_lowp")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
SYSTEMS = {"gb300": "DGX-GB300", "gb200": "DGX-GB200", "b300": "DGX-B300", "b200": "DGX-B200"}
PRECISIONS = {  # the table's label -> the card's precision (compute, recipe field, recipe)
    "MXFP8": ("fp8", "fp8_recipe", "mxfp8"), "FP8-MX": ("fp8", "fp8_recipe", "mxfp8"),
    "NVFP4": ("fp4", "fp4_recipe", "nvfp4"), "FP8": ("fp8", "fp8_recipe", "current"),
    "FP8-CS": ("fp8", "fp8_recipe", "current"), "BF16": ("bf16", None, None)}


def _cells(e: dict) -> dict:
    """The quote's cells by column, for the three table layouts (26.06 on; 26.02-26.04.01 with FSDP; 25.11 by
    system, with the model first and a GA column)."""
    c = [x.strip() for x in e["quote"].strip().strip("|").split("|")]
    if len(c) == 14 and not c[0].startswith("DGX-"):  # 25.09: no precision column; "a (b)": b is the FP8-MX run
        cells = dict(zip("model gpus gbs mbs seq fsdp tp pp cp vp ep ga tok tfl".split(), c))
        cells = {k: (re.search(r"\((\d+)\)", v).group(1) if "(" in v and k != "model" else v) for k, v in cells.items()}
        return {**cells, "prec": "FP8-MX", "mbs": None}  # MBS = GBS / (DP x GA): the MBS cell has no MX value
    names = {13: "system gpus prec gbs mbs seq tp pp cp vp ep tok tfl",
             14: "system gpus prec gbs mbs seq fsdp tp pp cp vp ep tok tfl",
             15: "model gpus prec gbs mbs seq fsdp tp pp cp vp ep ga tok tfl"}[len(c)].split()
    return dict(zip(names, c))


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 195
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_quote_cells_give_the_row(row_id: str) -> None:
    e = ROWS[row_id]
    c = _cells(e)
    b, p, m, pr = e["batch"], e["parallel"], e["measured"], e["precision"]
    if "system" in c:
        assert c["system"] == SYSTEMS[e["gpu"]]
    else:
        assert "system DGX-" + e["gpu"].upper() in e["note"]
    assert int(c["gpus"]) == e["gpus"]
    label = c["prec"]
    tok, tfl = c["tok"], re.sub(r"\[.*", "", c["tfl"])
    if label == "FP8-CS (FP8-MX)":  # 25.11: FP8-CS figures first, FP8-MX in parentheses
        mx = pr.get("fp8_recipe") == "mxfp8"
        label = "FP8-MX" if mx else "FP8-CS"
        pick = (lambda s: re.search(r"\((\d+)\)", s).group(1)) if mx else (lambda s: s.split(" (")[0])
        tok, tfl = pick(tok), pick(tfl)
    compute, field, recipe = PRECISIONS[label]
    assert pr["compute"] == compute and (field is None or pr[field] == recipe)
    assert int(tok) == m["value"] and int(tfl) == m["also"]["tflops_per_gpu"]
    assert int(c["gbs"]) == b["global_batch_size"] and int(c["seq"]) == b["seq_len"]
    layout = (b["micro_batch_size"] if c["mbs"] is None else int(c["mbs"]), int(c["tp"]), int(c["pp"]), int(c["cp"]), None if c["vp"] in ("n/a", "1") else int(c["vp"]),
              1 if c["ep"] == "n/a" else int(c["ep"]))
    card = (b["micro_batch_size"], p["tp"], p["pp"], p["cp"], p["vpp"], p["ep"])
    # the card follows the release's preset where it contradicts the row's cells (FIX in the data's build; the note
    # says so and cites the preset)
    assert layout == card or ("the card follows the preset, not the row's cells" in e["note"]
                              and re.search(r"Preset \S+ \S+@[0-9a-f]{40} \w+_V2 ", e["note"]))
    if "fsdp" in c:
        assert (int(c["fsdp"]) > 0) == (p["strategy"] == "fsdp")
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]
    if "ga" in c:
        assert int(c["ga"]) == b["grad_accum"] or "which does not fit GBS" in e["note"]
    assert e["gpus_per_node"] == (4 if e["gpu"].startswith("gb") else 8) and e["nodes"] * e["gpus_per_node"] == e["gpus"]
    assert e["source"]["commit"] == "067f987df03b8355b03192d88d70f1709fedf51a"
    assert e["source"]["section"].split(" NeMo")[0] == row_id.split("-")[1][:2] + "." + row_id.split("-")[1][2:4] + (
        "." + row_id.split("-")[1][4:] if len(row_id.split("-")[1]) > 4 else "")


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_note_cites_the_config_it_read_and_the_bf16_layers(row_id: str) -> None:
    note = ROWS[row_id]["note"]
    assert re.search(r"(Preset|Nearest preset|Recipe) NVIDIA-NeMo/Megatron-Bridge \S+@[0-9a-f]{40} \w+", note)
    compute = ROWS[row_id]["precision"]["compute"]
    if compute == "fp4":
        assert "bf16_with_nvfp4_mixed" in note and "Layers kept in bf16" in note
    elif ROWS[row_id]["precision"].get("fp8_recipe") == "mxfp8":
        assert "bf16_with_mxfp8_mixed" in note and "no transformer layer is kept in bf16" in note


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_every_row_plans_or_gives_its_reason(row_id: str) -> None:
    try:
        card, notes = st.map_train(ROWS[row_id])
    except st.Unmapped as u:
        assert u.status in ("not_representable", "skipped") and u.reasons
        return
    assert card["model"] and notes is not None


@pytest.mark.parametrize("row_id", sorted(r for r in ROWS if "nemotron3-super" in r and "nvfp4" in r))
def test_nemotron_3_super_nvfp4_keeps_its_last_14_layers_bf16_from_v0_4_2(row_id: str) -> None:
    """nemotron_3_super_bf16_with_nvfp4_mixed (num_layers_at_end_in_bf16 14) from the 26.04.01 container on; the 26.04
    container's config still ran the plain NVFP4 recipe."""
    pr = ROWS[row_id]["precision"]
    assert pr.get("bf16_last_layers") == (None if row_id.startswith("mbridge-2604-") else 14)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_primary_weights_follow_the_configs_param_gather(row_id: str) -> None:
    """MXFP8 and FP8 current scaling set fp8_param_gather, NVFP4 fp4_param_gather (Megatron-Bridge mixed_precision.py),
    except Kimi K2 with Muon (kimi_llm_pretrain.py) and Nemotron 3 Super NVFP4 from 26.04.01 on."""
    e = ROWS[row_id]
    pr = e["precision"]
    if pr["compute"] == "fp4":
        assert pr.get("fp4_params") is (None if "nemotron3-super" in row_id and not row_id.startswith("mbridge-2604-")
                                        else True)
    elif pr["compute"] == "fp8":
        assert pr.get("fp8_params") is (None if "kimi" in row_id else True)
    else:
        assert "fp8_params" not in pr and "fp4_params" not in pr


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_fp8_attention_where_the_preset_sets_fp8_dot_product_attention(row_id: str) -> None:
    """The MoE perf presets from 26.06 set fp8_dot_product_attention (overrides.py l.244-245 at v0.5.0): those rows
    carry precision.fp8_attention and map to a card with it; no other row does."""
    e = ROWS[row_id]
    says = "fp8_dot_product_attention True -> precision.fp8_attention true" in e["note"]
    assert bool(e["precision"].get("fp8_attention")) is says
    if says:
        card, notes = st.map_train(e)
        assert card["precision"]["fp8_attention"] is True and any(n.startswith("fp8 attention") for n in notes)
        st.validate(card)
