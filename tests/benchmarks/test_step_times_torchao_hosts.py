"""benchmarks/step_times.py: torchao's H100 float8 training tables ran on Meta's H100 variant (torchao's roofline
specs for the device named 'NVIDIA H100' are 'custom to Meta's H100 variant'; torchtitan's performance page: 96 GB
HBM2e at 2.4 TB/s, 'the default 500W power limit'), so their entries carry the same hardware_rates as torchtitan's
own rows on those hosts and the same card (catalog h100-sxm-hbm2e-96gb), and the calibration built from them is
the one built for those rows."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_torchao_hosts")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
TORCHAO_H100 = sorted(i for i, e in ENTRIES.items() if i.startswith("torchao-") and e["gpu"] == "h100-sxm-hbm2e-96gb")


def test_every_torchao_h100_entry_is_meta_variant_and_cited():
    assert len(TORCHAO_H100) == 12
    for i in TORCHAO_H100:
        hr = ENTRIES[i]["hardware_rates"]
        assert (hr["power_limit_w"], hr["hbm_tb_per_s"]) == (500, 2.4), i
        assert "custom to Meta's H100 variant" in hr["quote"] and "default 500W power limit" in hr["quote"], i


@pytest.mark.parametrize("row_id", ["torchao-f8-2503-h100-llama3-8b-bf16",
                                    "torchao-f8nc-2502-h100-llama3-8b-4k-noac-bf16-eager"])
def test_calibration_matches_torchtitans_own_hosts(row_id):
    cal, notes = st.hardware_calibration(ENTRIES[row_id], "h100-sxm-hbm2e-96gb")
    ref, _ = st.hardware_calibration(ENTRIES["titan-h100-8b-8gpu"], "h100-sxm-hbm2e-96gb")
    assert cal.device("h100-sxm-hbm2e-96gb").overrides() == ref.device("h100-sxm-hbm2e-96gb").overrides()
    assert "power limit 500 W of 700 W" in notes[0]
