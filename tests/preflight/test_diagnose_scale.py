"""`diagnose` is linear in the log's size (issue 17: a 3,000-character single-line log took 14 s).

Each shape below is one that a quadratic scan would choke on: many messages on one line, long
whitespace or digit runs after the phrase, deep frame stacks, many exception prefixes. The default
suite reads 5 MB of each under a bound; the slow test reads 100 MB through the CLI in under 10 s."""

from __future__ import annotations

import time

import pytest
from helpers import invoke

from trainfit.errors import TrainfitError
from trainfit.preflight.diagnose import diagnose_log

MSG = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.99 GiB"
       " of which 0 bytes is free. Process 1 has 2.00 GiB memory in use.")
FRAME = '  File "/x/site-packages/torch/nn/modules/module.py", line 1736, in _call_impl\n    return forward_call(*args, **kwargs)\n'


def shapes(n: int) -> dict[str, str]:
    return {
        "messages on one line": (MSG + " ") * (n // (len(MSG) + 1)),
        "spaces then a message": " " * n + MSG,
        "a deep frame stack": "Traceback (most recent call last):\n" + FRAME * (n // len(FRAME)) + MSG,
        "exception prefixes": ("RuntimeError:" + " " * 50) * (n // 63) + MSG,
        "digits after the phrase": "CUDA out of memory. Tried to allocate " + "1" * n + " GiB. " + MSG,
        "phrases without sizes": "CUDA out of memory. Tried to allocate x " * (n // 40) + MSG,
        "blank lines": "\n" * n + MSG,
    }


def _time(text: str) -> float:
    t = time.perf_counter()
    try:
        diagnose_log(text)
    except TrainfitError:
        pass
    return time.perf_counter() - t


def test_five_megabytes_of_every_shape_is_fast():
    """5 MB of each shape in well under a second on a loaded 2-core machine (measured 0.01-0.5 s)."""
    slow = {name: round(s, 2) for name, text in shapes(5_000_000).items() if (s := _time(text)) > 2.0}
    assert not slow, slow


def test_time_grows_linearly():
    """Ten times the log, about ten times the time (a quadratic scan would take a hundred)."""
    small, big = shapes(1_000_000)["messages on one line"], shapes(10_000_000)["messages on one line"]
    _time(small)  # warm
    t_small = min(_time(small) for _ in range(3))
    t_big = min(_time(big) for _ in range(3))
    assert t_big < 30 * max(t_small, 5e-3), (t_small, t_big)


def test_the_issue_log_of_3000_characters():
    for text in shapes(3000).values():
        assert _time(text) < 0.1


@pytest.mark.slow
def test_hundred_megabytes_through_the_cli(tmp_path):
    """Issue 17's bound: 100 MB of log in under 10 s, file read included (measured 0.7 s for the
    worst shape on the 2-core machine, 0.05-0.3 s for the others)."""
    for name, text in shapes(100_000_000).items():
        log = tmp_path / "big.log"
        log.write_text(text)
        t = time.perf_counter()
        res = invoke("diagnose", "--log", log, "--json")
        took = time.perf_counter() - t
        assert res.exit_code == 0, (name, res.output[-300:])
        assert took < 10, (name, took)
