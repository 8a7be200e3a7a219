"""docs/python-api.md names the keys of `trainfit fit --json`'s rows exactly (a review found it calling them
`peak_device_bytes`, the Python attribute, while the JSON prints `peak_gpu_bytes` and more keys)."""

import re
from pathlib import Path
from types import SimpleNamespace

from trainfit.cli.fit_cmd import _row

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_documented_fit_json_row_keys_are_the_printed_ones():
    text = " ".join(DOC.read_text().split())
    start = text.index("`trainfit fit --json` prints the same rows under `rows`, with these keys")
    sentence = text[start:text.index("string).", start)]
    documented = re.findall(r"`([a-z_]+)`(?: \([^)]*\))?[,.]? ", sentence.split("(`trainfit.cli.fit_cmd._row`):", 1)[1])
    row = SimpleNamespace(gpu="h100-sxm", gpus=1, fits=True, within_limits=True, peak_device_bytes=1.0e9,
                          headroom_bytes=2.0e9, peak_phase="backward", host_ram_bytes=3.0e9, tokens_per_s=1.0,
                          step_seconds=1.0, step_unavailable=None, cost_per_hour=1.0, currency="USD", price_id="",
                          billed_gpus=1, billing_note="",
                          cost_per_step=1.0, run_steps=10, run_seconds=10.0, cost_per_run=1.0, rank_cost=1.0,
                          rank_currency="USD", pareto=True, knobs={}, parallel={}, stack=None)
    printed = list(_row(row))
    assert [k for k in documented if k in printed] == printed
    assert "peak_device_bytes" not in printed and type(_row(row)["peak_gpu_bytes"]) is int
