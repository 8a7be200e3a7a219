#!/usr/bin/env bash
# The fourth device call: the third held-out calibration set, measured after the allocator replay was written.
set -u
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 PYTHONWARNINGS=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
{
  date -u
  echo "== measure held-out 3"; timeout 200 python3 benchmarks/gpu_calibrate.py measure --only heldout3 --out "$OUT/heldout3.json"; echo "heldout3 rc=$?"
  date -u
} 2>&1 | grep -v -E "Warning|warnings.warn|Writing model shards|Loading weights" | tee "$OUT/log4.txt"
