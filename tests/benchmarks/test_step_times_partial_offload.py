"""benchmarks/step_times.py: the Megatron-Bridge GB200 / GB300 Llama rows whose recipes offload the activations of
some layers (Megatron-Core cpu_offloading_num_layers) state it as the entry's activation_offload_layers, which reaches
the card as parallel.activation_offload_layers, only where the entry's note cites the recipe's figure."""

from __future__ import annotations

import re

from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_partial_offload")
ENTRIES = st.load_entries(st.TRAIN_DATA)


def test_every_cited_partial_offload_is_on_its_entry_and_reaches_the_card() -> None:
    stated = 0
    for e in ENTRIES:
        cited = re.findall(r"cpu_offloading_num_layers (\d+)", e.get("note", ""))
        n = e.get("activation_offload_layers")
        if n is None:
            assert not cited, e["id"]
            continue
        stated += 1
        assert int(cited[0]) == n, e["id"]  # the entry's own recipe figure comes first in its note
        assert e["gpu"] in ("gb200", "gb300") and e["host"]["memory_gbps"] and e["host"]["source"]
        card, _ = st.map_train(e)
        assert card["parallel"]["activation_offload"] is True
        assert card["parallel"]["activation_offload_layers"] == n
    assert stated == 12


def test_other_rows_state_no_partial_offload() -> None:
    e = next(e for e in ENTRIES if e["id"] == "mbridge-260401-h100-llama3-70b-pt-fp8-64g")
    card, _ = st.map_train(e)
    assert "activation_offload_layers" not in card["parallel"] and "activation_offload" not in card["parallel"]
