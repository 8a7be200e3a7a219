#!/usr/bin/env bash
# The third device call: `trainfit accept --device cuda` after the generation-engine refactor, and the
# second held-out calibration set (measured after every model change the first two calls prompted).
set -u
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 PYTHONWARNINGS=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
{
  date -u
  echo "== accept --device cuda"; SECONDS=0
  timeout 150 python3 -m trainfit.cli.main accept --device cuda --json > "$OUT/accept_cuda_final.json"; echo "accept rc=$? in ${SECONDS}s"
  python3 -c "import json; [print(c['name'], c['status'], c['evidence'][:300]) for c in json.load(open('$OUT/accept_cuda_final.json'))['checks']]"
  echo "== measure held-out 2"; timeout 200 python3 benchmarks/gpu_calibrate.py measure --only heldout2 --out "$OUT/heldout2.json"; echo "heldout2 rc=$?"
  date -u
} 2>&1 | grep -v -E "Warning|warnings.warn|Writing model shards|Loading weights" | tee "$OUT/log3.txt"
