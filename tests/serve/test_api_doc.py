"""docs/api.md describes `POST /api/fit`'s answer key for key: the object's keys and each row's keys, `skipped` and
the rows' `stack` among them (before, the description lacked `skipped`)."""

import re
from pathlib import Path

from trainfit.serve.worker import call

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _fit_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## POST /api/fit"):text.index("## HTML reports")]


def test_fit_answer_keys_are_documented():
    section = _fit_section()
    top = set(re.findall(r'"(\w+)"', re.search(r"`200`: `\{([^}]*)\}`", section).group(1)))
    rows = {k.strip() for k in re.search(r"`trainfit fit --json` \(`([^`]*)`\)", section).group(1).split(",")}
    status, data = call("fit", {"card": {"model": "Qwen/Qwen3-0.6B", "scope": "lora", "loss": {"chunked": True},
                                         "precision": {"optimizer": "adamw"},
                                         "parallel": {"strategy": "fsdp", "offload": "none",
                                                      "gradient_checkpointing": True}},
                                "gpus": ["h100-sxm"], "max_gpus": 1})
    assert status == 200, data
    assert set(data) == top and "skipped" in top
    assert set(data["rows"][0]) == rows and "stack" in rows
    # what every row holds per step, as `trainfit fit --json` gives it (before: only the HTML report stated it)
    assert "batch_basis" in top and "batch_basis" in section
    basis = data["batch_basis"]
    assert basis["basis"] == "global_batch" and basis["tokens_per_step"] == basis["sequences_per_step"] * 2048


def test_max_gpus_counts_tried_are_fit_search_gpu_counts():
    """docs/api.md's `max_gpus` row lists the counts the search tries: fit_search.GPU_COUNTS (before, the doc said
    1, 2, 4, 8, 16, 32, 64; the search tries 1..8 then 16, 32, 64)."""
    from trainfit.fit_search import GPU_COUNTS

    listed = re.search(r"\| `max_gpus` \|[^\n]*counts tried: ([0-9, ]+)\)", _fit_section()).group(1)
    assert tuple(int(c) for c in listed.split(",")) == GPU_COUNTS
