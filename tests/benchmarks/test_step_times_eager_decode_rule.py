"""step_times: the eager decode launch is priced by one rule for vLLM and SGLang (``decode_step`` module docstring,
"The eager decode launch, one rule for both engines"). verl PR #5596's eager SGLang rollout on a GB200 NVL4 is planned
at ``host_s_per_forward_kernel`` like every vLLM eager row; at SGLang's published 27.4 us per kernel it would land
+38 %, but the same source's vLLM figure (25.1 us) applied to the vLLM rows takes the generation subset from 17.2 %
to 27.6 % median |error|, so neither engine gets its published figure until what the training figure offsets on the
vLLM rows is modelled."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

st = load_step_times("step_times_eager_decode_rule")
ENTRIES = {e["id"]: e for e in st.load_entries(st.RL_DATA)}
ROW = "verl-pr5596-grpo-qwen3-8b-gsm8k-gb200-4g"


def _ratio() -> float:
    e = ENTRIES[ROW]
    card, _ = st.map_rl(e)
    assert card["rollout"]["engine"] == "sglang" and card["rollout"]["cuda_graphs"] is False
    gen, _ = st.phase_seconds(st.plan_card(card), "generation")
    return gen / e["measured"]["phases_s"]["generation"]


def test_the_pr5596_sglang_eager_generation_is_planned_by_the_shared_rule():
    # over the published ~265 s, as the vLLM eager rows' rule gives it (+65 % at 1877794's parent)
    assert 1.5 < _ratio() < 1.8


@pytest.mark.xfail(strict=True, reason="SGLang's published eager price (27.4 us) is not applied while vLLM's "
                                       "(25.1 us, same source) cannot be (module docstring)")
def test_the_pr5596_sglang_eager_generation_is_within_half_of_the_published_phase():
    assert abs(_ratio() - 1) <= 0.5
