"""The fuzz suite's session report: cases run and the slowest case per test (printed with -s or -rA)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    from fuzzlib import CODES, FAILURES, STATS, TOTAL

    if not STATS:
        return
    total = sum(len(v) for v in STATS.values())
    terminalreporter.write_sep("-", f"trainfit fuzz: {total} CLI runs (budget TRAINFIT_FUZZ_EXAMPLES={TOTAL})")
    for name, secs in sorted(STATS.items()):
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(CODES.get(name, {}).items()))
        terminalreporter.write_line(f"  {name:<14} {len(secs):>6} runs, {sum(secs):7.1f} s, slowest {max(secs):.2f} s"
                                    + (f" ({codes})" if codes else ""))
    if FAILURES:
        by_sig: dict[tuple[str, str], list[dict[str, str]]] = {}
        for f in FAILURES:
            by_sig.setdefault((f["test"], f["signature"]), []).append(f)
        terminalreporter.write_sep("-", f"trainfit fuzz: {len(FAILURES)} failing cases, {len(by_sig)} distinct")
        for (test, sig), items in sorted(by_sig.items(), key=lambda kv: -len(kv[1])):
            small = min(items, key=lambda f: len(f["case"]))
            terminalreporter.write_line(f"  {len(items):>5}x {test}: {sig}")
            terminalreporter.write_line(f"         smallest case: {small['case'][:600]}")
            terminalreporter.write_line("         " + small["message"][:900].replace("\n", "\n         "))


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001
    from fuzzlib import FAILURES, _progress

    _progress(force=True)
    if FAILURES and session.exitstatus == 0:
        session.exitstatus = 1
