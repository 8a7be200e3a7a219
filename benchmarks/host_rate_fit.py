"""Which scored rows the host's per-kernel rate decides, and what a half-0 fit of that rate on them gives.

``compute.rates.HOST_S_PER_FORWARD_KERNEL`` (65 us) and ``HOST_S_PER_BACKWARD_KERNEL`` (12 us) were fitted on the
15 H200 "default" steps of one machine. This re-plans every row of ``benchmarks/step_times.py`` with both defaults
scaled by one factor (a faster or slower host, as ``trainfit calibrate`` scales them: ``calibration.records``), or
the forward rate alone (``--forward-only``), and with both at 0:

* a row is *launch-sensitive* when ``1 - t(rates 0) / t(defaults)`` is at least ``--threshold`` (the share of the
  planned time that the host's issue rate adds over the device's);
* the fit takes the factor that minimises the median ``|log(planned / published)|`` over the launch-sensitive
  published rows of half 0 (``int(sha1(id), 16) % 2 == 0``, the harness's ``half``) and reports the held-out half
  1 at that factor beside the defaults. The "mean response not published" subset and the project's own H200 sets
  are reported apart and never fitted on.

Each setting runs ``step_times.build()`` in a subprocess whose ``DeviceRates`` keyword defaults are replaced, so a
calibration (the harness's ``hardware_calibration``) still overrides them where an entry has one.

``--h200-grid`` refits the two defaults the way they were first fitted: every pair of the grid ``GRID_FORWARD_US`` x
``GRID_BACKWARD_US`` plans the project's own H200 steps only (``step_times.h200_rows``, one subprocess a pair), the
pair with the least median ``|planned / measured - 1|`` over the "default" (fit) set's training steps is taken (ties to
the pair nearest the defaults), and the three held-out sets are printed beside it, never fitted on.

Usage::

    .venv/bin/python benchmarks/host_rate_fit.py [--threshold 0.15] [--forward-only] [--rows]
    .venv/bin/python benchmarks/host_rate_fit.py --h200-grid
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FORWARD_US = (20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 85)
DEFAULT_FORWARD_US, DEFAULT_BACKWARD_US = 65.0, 12.0
GRID_FORWARD_US = (30, 35, 40, 45, 50, 55, 60, 65, 70)
GRID_BACKWARD_US = (8, 10, 12, 14, 16, 18, 20)
ASSUMED_MEAN = "RL, mean response not published (default length profile)"


def _step_times_at(forward_s: float, backward_s: float):
    """benchmarks/step_times.py loaded with the host rates' defaults set to ``forward_s`` / ``backward_s`` s a
    kernel (in a worker subprocess: the defaults are process-wide)."""
    from trainfit.compute.rates import DeviceRates

    kw = DeviceRates.__init__.__kwdefaults__
    kw["host_s_per_forward_kernel"], kw["host_s_per_backward_kernel"] = forward_s, backward_s
    sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location("step_times", HERE / "step_times.py")
    st = importlib.util.module_from_spec(spec)
    sys.modules["step_times"] = st
    spec.loader.exec_module(st)
    return st


def _worker(forward_s: float, backward_s: float, out: str) -> None:
    st = _step_times_at(forward_s, backward_s)
    rows = [{"id": r.id, "subset": r.subset, "quantity": r.quantity, "published_s": r.published_s,
             "trainfit_s": r.trainfit_s, "half": r.half, "status": r.status} for r in st.build()["rows"]]
    Path(out).write_text(json.dumps(rows))


def _h200_worker(forward_s: float, backward_s: float, out: str) -> None:
    st = _step_times_at(forward_s, backward_s)
    rows = [{"id": r.id, "subset": r.subset, "quantity": r.quantity, "published_s": r.published_s,
             "trainfit_s": r.trainfit_s, "status": r.status} for r in st.h200_rows([])]
    Path(out).write_text(json.dumps(rows))


def _h200_errors(rows: list[dict]) -> dict[str, list[float]]:
    by: dict[str, list[float]] = {}
    for r in rows:
        if r["status"] == "mapped" and r["quantity"] == "step" and r["trainfit_s"] and r["published_s"]:
            by.setdefault(r["subset"], []).append(r["trainfit_s"] / r["published_s"] - 1)
    return by


def h200_grid() -> int:
    """The grid refit of ``HOST_S_PER_FORWARD_KERNEL`` / ``HOST_S_PER_BACKWARD_KERNEL`` on the H200 default set."""
    pairs = [(f, b) for f in GRID_FORWARD_US for b in GRID_BACKWARD_US]
    med: dict[tuple[int, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for i in range(0, len(pairs), 2):  # two at a time
            procs = []
            for f, b in pairs[i:i + 2]:
                out = Path(d) / f"{f}_{b}.json"
                procs.append(((f, b), out, subprocess.Popen(
                    [sys.executable, __file__, "--h200-worker", str(f * 1e-6), str(b * 1e-6), str(out)])))
            for key, out, p in procs:
                if p.wait():
                    raise SystemExit(f"worker {key} failed")
                by = _h200_errors(json.loads(out.read_text()))
                med[key] = {s: statistics.median(abs(e) for e in v) for s, v in by.items()}
    fit = "H200 default"
    sets = sorted(next(iter(med.values())))
    print("forward us, backward us | median |planned/measured - 1| per H200 set (fit: default)")
    for key in pairs:
        print(f"{key[0]:3d} {key[1]:3d} | " + " | ".join(f"{s[5:]} {med[key][s]:.1%}" for s in sets))
    best = min(pairs, key=lambda k: (round(med[k][fit], 4), abs(k[0] - DEFAULT_FORWARD_US)
                                     + abs(k[1] - DEFAULT_BACKWARD_US)))
    cur = (int(DEFAULT_FORWARD_US), int(DEFAULT_BACKWARD_US))
    for name, key in (("defaults", cur), ("fit", best)):
        print(f"{name}: {key[0]} / {key[1]} us: " + ", ".join(f"{s[5:]} {med[key][s]:.1%}" for s in sets))
    return 0


def _planned(forward_us: float, backward_us: float, tmp: Path) -> dict[tuple[str, str, str], dict]:
    out = tmp / f"{forward_us:g}_{backward_us:g}.json"
    subprocess.run([sys.executable, __file__, "--worker", str(forward_us * 1e-6), str(backward_us * 1e-6), str(out)],
                   check=True)
    return {(r["id"], r["subset"], r["quantity"]): r for r in json.loads(out.read_text())}


def _group(key: tuple[str, str, str]) -> str:
    return "H200" if key[1].startswith("H200") else "assumed" if key[1] == ASSUMED_MEAN else "published"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threshold", type=float, default=0.15)
    ap.add_argument("--forward-only", action="store_true", help="scale the forward rate only")
    ap.add_argument("--rows", action="store_true", help="list the launch-sensitive rows")
    ap.add_argument("--h200-grid", action="store_true", help="refit both defaults on the H200 default set")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--h200-worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.h200_worker:
        _h200_worker(float(args.h200_worker[0]), float(args.h200_worker[1]), args.h200_worker[2])
        return 0
    if args.h200_grid:
        return h200_grid()
    if args.worker:
        _worker(float(args.worker[0]), float(args.worker[1]), args.worker[2])
        return 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        base = _planned(DEFAULT_FORWARD_US, DEFAULT_BACKWARD_US, tmp)
        zero = _planned(0.0, 0.0, tmp)
        runs = {}
        for f in FORWARD_US:
            b = DEFAULT_BACKWARD_US if args.forward_only else DEFAULT_BACKWARD_US * f / DEFAULT_FORWARD_US
            runs[f] = base if f == DEFAULT_FORWARD_US else _planned(f, b, tmp)
    share = {k: 1 - zero[k]["trainfit_s"] / r["trainfit_s"] for k, r in base.items()
             if r["status"] == "mapped" and r["trainfit_s"] and r["published_s"] and zero[k]["trainfit_s"]}
    sens = [k for k, s in share.items() if s >= args.threshold]
    print(f"{len(share)} scored rows; {len(sens)} with the host's issue rate >= {args.threshold:.0%} of the planned "
          f"time ({sum(_group(k) == 'published' for k in sens)} published, "
          f"{sum(_group(k) == 'assumed' for k in sens)} mean-response-not-published, "
          f"{sum(_group(k) == 'H200' for k in sens)} H200)")
    if args.rows:
        for k in sorted(sens, key=lambda k: (_group(k), k[1], -share[k])):
            r = base[k]
            print(f"  {share[k]:4.0%} half {r['half']} {r['trainfit_s'] / r['published_s'] - 1:+7.1%}  {k[1][:26]:26} "
                  f"{k[2]:12} {k[0]}")

    def med_log(f: int, group: str, half: int) -> tuple[int, float]:
        ks = [k for k in sens if _group(k) == group and base[k]["half"] == half]
        return len(ks), statistics.median(abs(math.log(runs[f][k]["trainfit_s"] / runs[f][k]["published_s"]))
                                          for k in ks) if ks else float("nan")

    print("forward us | median |log(planned/published)| of the launch-sensitive rows, half 0 / half 1")
    for f in FORWARD_US:
        cells = []
        for g in ("published", "assumed", "H200"):
            (n0, m0), (n1, m1) = med_log(f, g, 0), med_log(f, g, 1)
            cells.append(f"{g} {m0:.3f} (n {n0}) / {m1:.3f} (n {n1})")
        print(f"{f:9d}  | " + " | ".join(cells))
    best = min(FORWARD_US, key=lambda f: (med_log(f, "published", 0)[1], abs(f - DEFAULT_FORWARD_US)))
    print(f"half-0 fit: {best} us per forward kernel; held-out half 1 at it {med_log(best, 'published', 1)[1]:.3f}, "
          f"at {DEFAULT_FORWARD_US:g} us {med_log(int(DEFAULT_FORWARD_US), 'published', 1)[1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
