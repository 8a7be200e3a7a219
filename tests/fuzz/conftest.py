"""The fuzz suite's session report: cases run and the slowest case per test (printed with -s or -rA)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    from fuzzlib import CODES, STATS, TOTAL

    if not STATS:
        return
    total = sum(len(v) for v in STATS.values())
    terminalreporter.write_sep("-", f"trainfit fuzz: {total} CLI runs (budget TRAINFIT_FUZZ_EXAMPLES={TOTAL})")
    for name, secs in sorted(STATS.items()):
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(CODES.get(name, {}).items()))
        terminalreporter.write_line(f"  {name:<14} {len(secs):>6} runs, {sum(secs):7.1f} s, slowest {max(secs):.2f} s"
                                    + (f" ({codes})" if codes else ""))
