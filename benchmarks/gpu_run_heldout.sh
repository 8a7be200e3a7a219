#!/usr/bin/env bash
# The second device call: `trainfit accept --device cuda` after the grader fix, and the held-out
# calibration cases (measured after the overhead constants were fitted on the first call's grid).
set -u
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 PYTHONWARNINGS=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
{
  date -u
  echo "== accept --device cuda"; SECONDS=0
  timeout 150 python3 -m trainfit.cli.main accept --device cuda --json > "$OUT/accept_cuda.json"; echo "accept rc=$? in ${SECONDS}s"
  python3 -c "import json; [print(c['name'], c['status'], c['evidence'][:300]) for c in json.load(open('$OUT/accept_cuda.json'))['checks']]"
  echo "== measure held-out"; timeout 200 python3 benchmarks/gpu_calibrate.py measure --only heldout --out "$OUT/heldout.json"; echo "heldout rc=$?"
  date -u
} 2>&1 | grep -v -E "Warning|warnings.warn|Writing model shards|Loading weights" | tee "$OUT/log2.txt"
