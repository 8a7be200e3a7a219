"""benchmarks/step_times.py, the vLLM release of the verl GRPO-LoRA rows (eric-haibin-lin/verl-data logs) whose log
names it: ``software.vllm``, read from the line number of the LoRA tokenizer warning each log prints.

Every verl-data log prints vLLM's ``No tokenizer found in /simon-stub-path, using base model tokenizer instead``
(``get_lora_tokenizer`` in ``vllm/transformers_utils/tokenizer.py``) with its ``[tokenizer.py:NNN]`` prefix. In the
PyPI source releases (https://pypi.org/project/vllm/, sdists read 2026-12-05) that ``logger.warning(`` call sits at
l.264 in 0.7.3 only, and at l.295 in 0.9.1 and 0.9.2 (l.236 in 0.7.0-0.7.1, l.238 in 0.7.2, l.281 in 0.8.0-0.8.4,
l.284 in 0.8.5, l.294 in 0.9.0); verl's ``vllm`` extra admits 0.7.3 to 0.9.1 (setup.py l.51
@2633140a73be8b6c244910c3fbbd021a43920344). The pin moves no planned time today (only a V1 engine's FlashAttention-3
decode tile reads ``software.vllm``, ``plan.rl_generation.vllm_fa3_one_mma_wg``); it keeps the release on the card
for the open one-engine generation miss (``compute.decode_step``, "vLLM V0 at 320 sequences an engine")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
FILES = ("published_rl_times_firstcontact_2612d.json", "published_rl_times_firstcontact_2612e.json")
WARNING_LINE = {"0.7.3": 264, "0.9.1": 295}
"""The ``logger.warning(`` line of ``get_lora_tokenizer`` in the release's sdist (vllm-0.7.3.tar.gz
vllm/transformers_utils/tokenizer.py l.264; vllm-0.9.1.tar.gz l.295)."""
PINNED = {
    "verldata-grpo-lora-qwen25-0.5b-math-2g": "0.9.1",
    "verldata-grpo-lora-qwen25-1.5b-math-2g": "0.9.1",
    "verldata-grpo-lora-qwen25-3b-math-2g": "0.9.1",
    "verldata-grpo-lora-qwen25-7b-gsm8k-8g": "0.9.1",
    "verldata-grpo-lora-qwen25-7b-gsm8k-math-8g": "0.9.1",
    "verldata-grpo-lora-qwen25-1.5b-gsm8k-2g": "0.7.3",
    "verldata-grpo-lora-qwen25-3b-gsm8k-2g": "0.7.3",
    "verldata-grpo-lora-qwen25-14b-gsm8k-8g": "0.7.3",
    "verldata-grpo-lora-qwen25-32b-gsm8k-8g": "0.7.3",
    "verldata-grpo-lora-qwen25-72b-gsm8k-8g": "0.7.3",
}

st = load_step_times("trainfit_bench_step_times_verldata_vllm_release")
ROWS = {e["id"]: e for f in FILES for e in json.loads((REPO / "benchmarks" / "data" / f).read_text())}


@pytest.mark.parametrize("row_id", sorted(PINNED))
def test_the_pin_is_the_release_whose_warning_line_the_log_prints(row_id: str) -> None:
    e = ROWS[row_id]
    release = e["software"]["value"]["vllm"]
    assert release == PINNED[row_id]
    assert f"'tokenizer.py:{WARNING_LINE[release]}'" in e["software"]["source"]
    # the row's own note (2612d) or the file's shared note (2612e) records the line its log prints
    lines = {int(n) for n in re.findall(r"tokenizer\.py:(\d+)\]", e["note"])}
    assert WARNING_LINE[release] in lines


def test_only_rows_whose_log_line_was_read_are_pinned() -> None:
    """The 2612e GSM8K + MATH and TP-8 MATH rows, and the 7B MATH row, have no line recorded: no pin."""
    pinned = {i for i, e in ROWS.items() if i.startswith("verldata-") and e.get("software")}
    assert pinned == set(PINNED)


@pytest.mark.parametrize("row_id", sorted(PINNED))
def test_the_card_carries_the_release(row_id: str) -> None:
    card, notes = st.map_rl(ROWS[row_id])
    st.validate(card)
    assert card["software"]["vllm"] == PINNED[row_id]
    assert f"software: vllm {PINNED[row_id]} (the entry's software)" in notes
