"""The API's fit rows (``report.html.fit_rows``, "the rows of trainfit fit --json (same keys)", served by
``serve.worker.fit_payload``) carry ``step_unavailable`` and ``cost_per_step`` as ``trainfit fit --json`` does
(cli/fit_cmd.py ``_row``); the HTML table's step column says n/a for a row whose rollout engine cannot start,
as the CLI table does, not '-'."""

from __future__ import annotations

import re
from types import SimpleNamespace

from trainfit.cli.fit_cmd import _row
from trainfit.report.html import fit_fragment, fit_rows
from trainfit.scenarios import ppo_tier
from trainfit.search import search
from trainfit.spec.dotted import merge_under


def _rows():
    base = merge_under(ppo_tier("fsdp_ckpt"), {"rollout": {"engine": "vllm"}, "hardware": {"price_per_gpu_hour": 2.0,
                                                                                            "currency": "USD"}})
    result = search(base, {"rollout.gpu_memory_utilization": [0.3, 0.9]}, workers=1)
    return result.rows, fit_rows(SimpleNamespace(rows=result.rows))


def test_api_rows_carry_step_unavailable_and_cost_per_step():
    raw, rows = _rows()
    by = {r["knobs"]["rollout.gpu_memory_utilization"]: r for r in rows}
    assert by[0.3]["step_seconds"] is None and by[0.3]["step_unavailable"].startswith("the rollout engine cannot start (")
    assert by[0.3]["cost_per_step"] is None
    assert by[0.9]["step_unavailable"] is None and by[0.9]["cost_per_step"] > 0
    for r, api in zip(raw, rows):  # the CLI's values under the same keys
        cli = _row(r)
        assert {k: cli[k] for k in api} == api


def test_html_step_column_says_n_a():
    _, rows = _rows()
    html = fit_fragment(rows, evaluated=2, invalid=0, seconds=0.1)
    cells = re.findall(r'<tr class="(?:good|bad)">(.*?)</tr>', html)
    steps = [re.findall(r"<td[^>]*>(.*?)</td>", c)[7] for c in cells]
    by = {r["knobs"]["rollout.gpu_memory_utilization"]: s for r, s in zip(rows, steps)}
    assert by[0.3] == "n/a" and re.fullmatch(r"\d+\.\d\d", by[0.9])
