"""The slowest GPU's timeline over a step's micro-steps (``training.lockstep_flow_shop``): a two-machine flow shop
over the passes in order, the host's paced time on one machine and the slowest GPU's device line on the other. The
last micro-step pays its own passes' waits (no forward slack for the backward's extra device time), the earlier
ones one pooled budget; each pass's data-parallel window is the time it holds that GPU's compute stream, so more
paced time never grows a window by more than it grows the step."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute.training import lockstep_flow_shop

seconds = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
passes = st.lists(st.tuples(seconds, seconds), min_size=1, max_size=3)


def _recursion(paced: list[float], line: list[float], m: int) -> tuple[float, list[float]]:
    """Each pass ends on the slowest GPU when the host has queued it and that GPU has run it after the previous one:
    ``F_k = max(H_k, F_{k-1} + line_k)``, over ``m`` micro-steps; the mean micro-step and mean window of each pass."""
    host = finish = 0.0
    windows = [0.0] * len(paced)
    for _ in range(m):
        for k, (p, l) in enumerate(zip(paced, line)):
            host += p
            end = max(host, finish + l)
            windows[k] += end - finish
            finish = end
    return finish / m, [w / m for w in windows]


@settings(max_examples=300, deadline=None)
@given(jobs=passes, m=st.integers(min_value=1, max_value=12))
def test_closed_form_is_the_flow_shop_recursion(jobs, m):
    paced, line = [p for p, _ in jobs], [l for _, l in jobs]
    t = lockstep_flow_shop(paced_s=tuple(paced), line_s=tuple(line), micro_steps=m)
    micro, windows = _recursion(paced, line, m)
    assert t.micro_step_s == pytest.approx(micro, abs=1e-9)
    assert list(t.windows_s) == pytest.approx(windows, abs=1e-9)
    assert sum(t.windows_s) == pytest.approx(t.micro_step_s, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(jobs=passes, m=st.integers(min_value=1, max_value=12), which=st.integers(min_value=0, max_value=2),
       more=st.floats(min_value=0.0, max_value=2.0, allow_nan=False))
def test_more_paced_time_grows_no_window_beyond_the_step(jobs, m, which, more):
    paced, line = [p for p, _ in jobs], [l for _, l in jobs]
    which %= len(paced)
    base = lockstep_flow_shop(paced_s=tuple(paced), line_s=tuple(line), micro_steps=m)
    paced[which] += more
    after = lockstep_flow_shop(paced_s=tuple(paced), line_s=tuple(line), micro_steps=m)
    grown = [a - b for a, b in zip(after.windows_s, base.windows_s)]
    assert min(grown) >= -1e-9  # no window shrinks
    assert sum(grown) <= after.micro_step_s - base.micro_step_s + 1e-9  # nor grows more than the micro-step


def test_the_forward_slack_does_not_absorb_the_backward_wait_in_one_micro_step():
    # forward launch-bound (0.40 s paced, 0.30 s on the slowest GPU), backward device-bound (1.00 s paced, 1.20 s):
    # one pooled budget would end at max(1.40, 1.50) = 1.50 s; the backward cannot start before the host has queued
    # the forward, so the step ends at 0.40 + 1.20 = 1.60 s, and 0.05 s more forward host time ends it 0.05 s later
    t = lockstep_flow_shop(paced_s=(0.40, 1.00), line_s=(0.30, 1.20), micro_steps=1)
    assert t.micro_step_s == pytest.approx(1.60)
    assert t.windows_s == pytest.approx((0.40, 1.20))
    assert lockstep_flow_shop(paced_s=(0.45, 1.00), line_s=(0.30, 1.20), micro_steps=1).micro_step_s == \
        pytest.approx(1.65)


def test_many_micro_steps_approach_the_pooled_budget():
    # the host queues the next forward while the GPU runs the previous backward: only the last micro-step pays the
    # 0.10 s the forward's slack cannot give the backward, (1.60 + 255 x 1.50) / 256
    t = lockstep_flow_shop(paced_s=(0.40, 1.00), line_s=(0.30, 1.20), micro_steps=256)
    assert t.micro_step_s == pytest.approx((1.60 + 255 * 1.50) / 256)
    # later micro-steps: the forward's window starts while the GPU still runs the previous backward's excess
    assert t.windows_s == pytest.approx(((0.40 + 255 * 0.30) / 256, 1.20))


def test_no_wait_keeps_the_paced_windows():
    t = lockstep_flow_shop(paced_s=(0.40, 1.00, 0.0), line_s=(0.35, 0.90, 0.0), micro_steps=4)
    assert t.micro_step_s == pytest.approx(1.40)
    assert t.windows_s == pytest.approx((0.40, 1.00, 0.0))


def test_one_entry_a_pass():
    with pytest.raises(ValueError, match="one entry a pass"):
        lockstep_flow_shop(paced_s=(1.0,), line_s=(1.0, 2.0), micro_steps=1)
